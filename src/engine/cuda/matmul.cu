// matmul on CUDA (ops/matmul.h) through cuBLAS, and the row-major GEMM helper that conv1d
// shares (common.cuh). Row-major matrices are handed to column-major cuBLAS as their
// transposes: c^T = op(b)^T @ a^T, i.e. cuBLAS's A is our b and its B is our a.
//
// A 16-bit GEMM with a bias of its own dtype (every Linear layer of the fast path) goes
// through cuBLASLt with the bias in the epilogue, d = alpha a op(b) + beta c + bias, one
// pass over c instead of a bias pass before the GEMM; plans (descriptors and the
// heuristic's algorithm) are cached per shape. f32 (the parity path) keeps cublasGemmEx.
// A GELU after such a GEMM (the encoder's fc1) goes into the same epilogue (GELU_BIAS):
// cuBLASLt computes the tanh form of GELU, within 4.7e-4 of the erf form at every x (under
// an f16 unit in the last place where it is largest, |x| ~ 2; measured by the Matmul op test
// GeluWithinTheTanhFormOfErf) and 0.2 ms a turbo window faster than the exact pass after it
// (bench/RESULTS.md). PARLEY_GELU_EPILOGUE=0 keeps the exact pass.
//
// Before both, a decoder step's Linear layers (at most 8 rows of f16/bf16 against a 2-D
// trans_b weight, K a multiple of 8, 16-byte aligned) take gemv.cu's memory-bound kernel,
// which streams the weight at close to full bandwidth where cuBLAS does not; bias, alpha
// and beta are applied in its epilogue.
#include <cublasLt.h>

#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "engine/cuda/choice.cuh"
#include "engine/cuda/common.cuh"
#include "engine/env.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"

namespace parley::cuda {

namespace {

template <typename T>
__global__ void scale_add_bias_kernel(T* c, int64_t rows, int64_t cols, float beta, ParamRef bias,
                                      bool per_row, int64_t channels) {
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    float v = beta == 0.0f ? 0.0f : beta * dev_to_f32(c[i]);
    if (bias.ptr) v += load_param(bias, per_row ? r % channels : i - r * cols);
    c[i] = dev_from_f32<T>(v);
  }
}

void check_int(int64_t v, const char* what, const char* op) {
  if (!(v <= int64_t(INT_MAX)))
    throw Error(ErrorKind::unsupported, std::string("[") + op + "] " + what + " = " +
                                            std::to_string(v) + " exceeds cuBLAS's 32-bit limit");
}

// --- cuBLASLt with a bias epilogue ------------------------------------------------------

cublasLtHandle_t lt_handle() {
  static const cublasLtHandle_t h = [] {
    cublasLtHandle_t r = nullptr;
    check_cublas(cublasLtCreate(&r), "cublasLtCreate");
    return r;
  }();
  return h;
}

constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

void* lt_workspace() {
  static void* const w = [] {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, kLtWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
    return p;
  }();
  return w;
}

struct LtPlan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (our b), B, C
  cublasLtMatmulAlgo_t algo{};
};

// m n k trans_b dtype beta!=0 gelu
using LtKey = std::tuple<int64_t, int64_t, int64_t, bool, DType, bool, bool>;

// PARLEY_GELU_EPILOGUE=0: the exact erf GELU pass after cuBLASLt's GEMM instead of its epilogue.
bool lt_gelu() {
  static const bool on = env_switch_on("PARLEY_GELU_EPILOGUE");
  return on;
}

std::mutex g_lt_mutex;
std::map<LtKey, LtPlan> g_lt_plans;

LtPlan make_plan(const GemmArgs& g, bool gelu) {
  LtPlan p;
  const cudaDataType_t t = cuda_data_type(g.ab_type);
  check_cublas(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  check_cublas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
               "cublasLt TRANSA");
  check_cublas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
               "cublasLt TRANSB");
  check_cublas(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
      "cublasLt EPILOGUE");
  const uint64_t m = uint64_t(g.m), n = uint64_t(g.n), k = uint64_t(g.k);
  if (g.trans_b)
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, t, k, n, int64_t(k)), "cublasLt layout A");
  else
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, t, n, k, int64_t(n)), "cublasLt layout A");
  check_cublas(cublasLtMatrixLayoutCreate(&p.b, t, k, m, int64_t(k)), "cublasLt layout B");
  check_cublas(cublasLtMatrixLayoutCreate(&p.c, t, n, m, int64_t(n)), "cublasLt layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const size_t ws = kLtWorkspaceBytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws),
               "cublasLt workspace preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_handle(), p.desc, p.a, p.b, p.c, p.c,
                                                           pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.ok = true;
  }
  return p;
}

// c = alpha a op(b) + beta c + bias through cuBLASLt; false when it has no algorithm for
// the shape (the caller falls back to the bias pass + cublasGemmEx).
bool gemm_bias_lt(const GemmArgs& g, const void* bias, bool gelu) {
  const LtKey key{g.m, g.n, g.k, g.trans_b, g.ab_type, g.beta != 0.0f, gelu};
  std::lock_guard<std::mutex> lock(g_lt_mutex);
  auto it = g_lt_plans.find(key);
  if (it == g_lt_plans.end()) it = g_lt_plans.emplace(key, make_plan(g, gelu)).first;
  const LtPlan& p = it->second;
  if (!p.ok) return false;
  check_cublas(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
      "cublasLt BIAS_POINTER");
  check_cublas(cublasLtMatmul(lt_handle(), p.desc, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, g.c, p.c,
                              g.c, p.c, &p.algo, lt_workspace(), kLtWorkspaceBytes, stream()),
               "cublasLtMatmul in matmul");
  return true;
}

// PARLEY_GEMV=0 sends the few-row GEMMs to cuBLAS as well (to compare the two).
bool gemv_enabled() {
  static const bool on = env_switch_on("PARLEY_GEMV");
  return on;
}

// PARLEY_NORM_FOLD=0 keeps a decoder step's LayerNorms as launches of their own before the
// GEMMs that read them (MatmulOptions::norm; to compare).
bool norm_fold_enabled() {
  static const bool on = env_switch_on("PARLEY_NORM_FOLD");
  return on;
}

}  // namespace

void scale_add_bias(void* c, DType c_type, int64_t rows, int64_t cols, float beta, ParamRef bias,
                    bool per_row, int64_t channels, const char* op) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  dispatch_device_float(c_type, op, [&](auto tag) {
    using T = decltype(tag);
    scale_add_bias_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(static_cast<T*>(c), rows, cols,
                                                                     beta, bias, per_row, channels);
  });
  check_launch(op);
}

void gemm(const GemmArgs& g, const char* op) {
  check_int(g.m, "M", op);
  check_int(g.n, "N", op);
  check_int(g.k, "K", op);
  check_int(g.batch, "batch", op);
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = int(g.n), n = int(g.m), k = int(g.k);
  const int ld_b = int(g.trans_b ? g.k : g.n), ld_a = k, ld_c = m;
  const cudaDataType_t ab = cuda_data_type(g.ab_type), ct = cuda_data_type(g.c_type);
  if (g.batch == 1) {
    const cublasStatus_t st =
        cublasGemmEx(cublas(), op_b, CUBLAS_OP_N, m, n, k, &g.alpha, g.b, ab, ld_b, g.a, ab, ld_a,
                     &g.beta, g.c, ct, ld_c, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      check_cublas(st, (std::string("cublasGemmEx in ") + op).c_str());
  } else {
    const cublasStatus_t st = cublasGemmStridedBatchedEx(
        cublas(), op_b, CUBLAS_OP_N, m, n, k, &g.alpha, g.b, ab, ld_b, g.stride_b, g.a, ab, ld_a,
        g.stride_a, &g.beta, g.c, ct, ld_c, g.stride_c, int(g.batch), CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      check_cublas(st, (std::string("cublasGemmStridedBatchedEx in ") + op).c_str());
  }
}

namespace {

// matmul's GEMM without the skinny path: cuBLASLt with the bias (and where allowed the GELU)
// in the epilogue, or the bias pass and cuBLAS. Returns whether the GELU was applied.
bool gemm_with_bias(GemmArgs g, Tensor& c, const MatmulOptions& opt) {
  constexpr const char* kOp = "matmul";
  const int64_t rows = g.batch * g.m;
  const bool lt = opt.bias && g.batch == 1 && g.k > 0 && g.ab_type != DType::f32 &&
                  g.c_type == g.ab_type && opt.bias->dtype() == g.c_type;
  if (lt && opt.gelu && lt_gelu() && gemm_bias_lt(g, opt.bias->raw(), true)) return true;
  if (lt && gemm_bias_lt(g, opt.bias->raw(), false)) return false;
  // Bias goes in first (c = beta * c + bias), then the GEMM accumulates with beta = 1:
  // the same sum as the header's order, and it lets cuBLAS write c only once.
  if (opt.bias || g.k == 0) {
    scale_add_bias(c.raw(), c.dtype(), rows, g.n, opt.beta, param_ref(opt.bias), false, 0, kOp);
    g.beta = 1.0f;
  }
  if (g.k == 0) return false;  // a @ b is all zeros
  gemm(g, kOp);
  return false;
}

}  // namespace

namespace {

// The GemmArgs of matmul(a, b, c, opt): a 2-D b folds a's batch into M (one GEMM); a 3-D b
// runs a strided-batched GEMM (a 2-D a is then shared by every batch).
GemmArgs gemm_args(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  GemmArgs g{};
  g.a = a.raw();
  g.b = b.raw();
  g.c = c.raw();
  g.ab_type = a.dtype();
  g.c_type = c.dtype();
  g.trans_b = opt.trans_b;
  g.k = a.dim(-1);
  g.n = opt.trans_b ? b.dim(-2) : b.dim(-1);
  if (b.ndim() == 2) {
    g.m = g.k ? a.numel() / g.k : c.numel() / (g.n ? g.n : 1);
  } else {
    g.m = a.dim(-2);
    g.batch = b.dim(0);
    g.stride_a = a.ndim() == 3 ? g.m * g.k : 0;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  }
  g.alpha = opt.alpha;
  g.beta = opt.beta;
  return g;
}

}  // namespace

// a [M, K] or [B, M, K]; b [K, N] / [N, K] (trans_b), or batched [B, K, N] / [B, N, K];
// c [M, N] or [B, M, N].
void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  constexpr const char* kOp = "matmul";
  const GemmArgs g = gemm_args(a, b, c, opt);
  if (g.batch * g.m == 0 || g.n == 0) return;
  if (g.k > 0 && gemv_enabled() && gemv(g, param_ref(opt.bias), opt.gelu, kOp)) return;
  const bool gelu_done = gemm_with_bias(g, c, opt);
  if (opt.gelu && !gelu_done) unary(UnaryOp::gelu, c, c);
}

namespace {

// opt.norm as gemv folds it; false where it cannot (PARLEY_NORM_FOLD=0, or gamma of another
// dtype than a's).
bool gemv_norm(const Tensor& a, const MatmulOptions& opt, GemvNorm& fold) {
  const NormInput& nm = *opt.norm;
  if (!norm_fold_enabled() || nm.gamma->dtype() != a.dtype()) return false;
  fold.gamma = nm.gamma->raw();
  fold.w_gamma = nm.w_gamma->data<float>();
  fold.w_shift = nm.w_shift->data<float>();
  fold.eps = nm.eps;
  fold.inv_k = 1.0f / float(a.dim(-1));
  return true;
}

// PARLEY_FUSED_CHOICE=0 makes matmul_masked_top1's choice a masked_topk launch after the
// GEMM (to compare).
bool fused_choice_enabled() {
  static const bool on = env_switch_on("PARLEY_FUSED_CHOICE");
  return on;
}

}  // namespace

bool matmul_norm_folded(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  GemvNorm fold;
  if (!gemv_enabled() || !gemv_norm(a, opt, fold)) return false;
  const GemmArgs g = gemm_args(a, b, c, opt);  // gemv refuses what it does not take
  return gemv(g, param_ref(opt.bias), opt.gelu, "matmul", &fold);
}

bool matmul_masked_top1(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt,
                        const Tensor* mask, const Tensor& rules, Tensor& logprobs, Tensor& indices,
                        const TimestampRuleAdvance* advance) {
  if (!gemv_enabled() || !fused_choice_enabled()) return false;
  GemvNorm fold;
  if (opt.norm && !gemv_norm(a, opt, fold)) return false;
  const GemmArgs g = gemm_args(a, b, c, opt);  // gemv refuses what it does not take
  GemvChoice choice;
  choice.mask = mask ? mask->data<int8_t>() : nullptr;
  choice.rules = rules.data<int32_t>();
  choice.width = int(rules.dim(1));
  choice.logprobs = logprobs.data<float>();
  choice.indices = indices.data<int32_t>();
  choice.advance = advance;
  return gemv(g, param_ref(opt.bias), opt.gelu, "matmul_masked_top1", opt.norm ? &fold : nullptr,
              &choice);
}

}  // namespace parley::cuda
