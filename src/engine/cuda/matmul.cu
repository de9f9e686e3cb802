// matmul on CUDA (ops/matmul.h) through cuBLAS, and the row-major GEMM helper that conv1d
// shares (common.cuh). Row-major matrices are handed to column-major cuBLAS as their
// transposes: c^T = op(b)^T @ a^T, i.e. cuBLAS's A is our b and its B is our a.
#include <climits>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/ops/matmul.h"

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
  check(v <= int64_t(INT_MAX), ErrorKind::unsupported,
        std::string("[") + op + "] " + what + " = " + std::to_string(v) +
            " exceeds cuBLAS's 32-bit limit");
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
    check_cublas(
        cublasGemmEx(cublas(), op_b, CUBLAS_OP_N, m, n, k, &g.alpha, g.b, ab, ld_b, g.a, ab, ld_a,
                     &g.beta, g.c, ct, ld_c, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        (std::string("cublasGemmEx in ") + op).c_str());
  } else {
    check_cublas(cublasGemmStridedBatchedEx(cublas(), op_b, CUBLAS_OP_N, m, n, k, &g.alpha, g.b, ab,
                                            ld_b, g.stride_b, g.a, ab, ld_a, g.stride_a, &g.beta,
                                            g.c, ct, ld_c, g.stride_c, int(g.batch),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 (std::string("cublasGemmStridedBatchedEx in ") + op).c_str());
  }
}

// a [M, K] or [B, M, K]; b [K, N] / [N, K] (trans_b), or batched [B, K, N] / [B, N, K];
// c [M, N] or [B, M, N]. A 2-D b folds a's batch into M (one GEMM); a 3-D b runs a
// strided-batched GEMM (a 2-D a is then shared by every batch).
void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  constexpr const char* kOp = "matmul";
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
  const int64_t rows = g.batch * g.m;
  if (rows == 0 || g.n == 0) return;
  g.alpha = opt.alpha;
  g.beta = opt.beta;
  // Bias goes in first (c = beta * c + bias), then the GEMM accumulates with beta = 1:
  // the same sum as the header's order, and it lets cuBLAS write c only once.
  if (opt.bias || g.k == 0) {
    scale_add_bias(c.raw(), c.dtype(), rows, g.n, opt.beta, param_ref(opt.bias), false, 0, kOp);
    g.beta = 1.0f;
  }
  if (g.k == 0) return;  // a @ b is all zeros
  gemm(g, kOp);
}

}  // namespace parley::cuda
