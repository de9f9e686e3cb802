// CPU matmul on a GEMM library: c = alpha * a @ op(b) (+ bias) + beta * c.
//   oneDNN (PARLEY_GEMM_ONEDNN): f32, and bf16 where the CPU has bf16 kernels (AVX-512 /
//     AMX); one primitive per problem, cached. Anything it has no kernel for (f16, bf16 on
//     an AVX2-only CPU) is converted to f32 first. Each primitive runs on the calling
//     thread's own scratchpad, so threads may run the same cached primitive at once.
//   OpenBLAS (PARLEY_GEMM_OPENBLAS): cblas_sgemm; 16-bit inputs are converted to f32 first.
// A 3-D a with a 2-D b folds the batch into M. bias and beta: either the GEMM library adds
// the bias itself (alpha = 1, beta = 0, the common Linear case), or c is first set to
// beta * c + bias and the GEMM accumulates into it (oneDNN scales its own bias by alpha).
#include "engine/ops/matmul.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include <immintrin.h>

#include "engine/cpu/avx2.h"
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/vec_math.h"
#include "engine/ops/elementwise.h"

#if defined(PARLEY_GEMM_ONEDNN)
#include <bit>
#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>

#include "engine/cpu/onednn.h"
#elif defined(PARLEY_GEMM_OPENBLAS)
#include <cblas.h>
#else
#error "one of PARLEY_GEMM_ONEDNN or PARLEY_GEMM_OPENBLAS must be defined"
#endif

namespace parley::cpu {

#if defined(PARLEY_GEMM_ONEDNN)

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A stream per calling thread: streams are not documented as safe to share across
// threads, and a CPU stream is a cheap handle on the one engine.
dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

void* onednn_scratchpad(size_t bytes) {
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    size_t size = 0;
  };
  thread_local Buffer buf;
  constexpr size_t kAlign = 64;
  if (buf.size < bytes + kAlign) {
    buf.size = bytes + kAlign;
    buf.data = std::make_unique<std::byte[]>(buf.size);
  }
  void* p = buf.data.get();
  size_t space = buf.size;
  return std::align(kAlign, bytes, p, space);
}

void onednn_execute(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
                    std::unordered_map<int, dnnl::memory> args, std::string_view op) {
  const dnnl::memory::desc scratch = pd.scratchpad_desc();
  if (const size_t bytes = scratch.get_size(); bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(scratch, onednn_engine(), onednn_scratchpad(bytes)));
  try {
    dnnl::stream& stream = onednn_stream();
    prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::internal, std::string(op) + " oneDNN: " + e.what());
  }
}

#endif

namespace {

// The problem after folding: `batch` independent (m x k) @ (k x n) products when b is 3-D
// (batch = 0 when b is 2-D and a's batch, if any, is folded into m).
struct Gemm {
  int64_t batch, m, n, k;
  bool trans_b;
};

Gemm describe(const Tensor& a, const Tensor& b, const MatmulOptions& opt) {
  const int64_t k = a.dim(-1);
  const int64_t n = opt.trans_b ? b.dim(-2) : b.dim(-1);
  if (b.ndim() == 3) return {a.dim(0), a.dim(1), n, k, opt.trans_b};
  return {0, a.numel() / std::max<int64_t>(k, 1), n, k, opt.trans_b};
}

// c [rows, n] = (beta ? beta * c : 0) + bias (bias may be null), in c's dtype.
void prefill(Tensor& c, const Tensor* bias, float beta) {
  const int64_t n = c.dim(-1);
  dispatch_float(c.dtype(), "matmul", [&](auto ctag) {
    using C = decltype(ctag);
    C* pc = c.data<C>();
    auto run = [&](auto bias_at) {
      cpu_threads().parallel_for(c.numel() / n, row_grain(n), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          C* row = pc + r * n;
          for (int64_t j = 0; j < n; ++j) {
            const float old = beta != 0.0f ? beta * to_f32(row[j]) : 0.0f;
            row[j] = from_f32<C>(old + bias_at(j));
          }
        }
      });
    };
    if (!bias) {
      run([](int64_t) { return 0.0f; });
    } else {
      dispatch_float(bias->dtype(), "matmul", [&](auto btag) {
        const auto* pb = bias->data<decltype(btag)>();
        run([pb](int64_t j) { return to_f32(pb[j]); });
      });
    }
  });
}

#if defined(PARLEY_GEMM_ONEDNN)

namespace dn = dnnl;

struct PrimitiveKey {
  int64_t batch, m, n, k;
  bool trans_b;
  DType ab, c;
  bool native_bias;
  DType bias;  // meaningful with native_bias only
  uint32_t alpha_bits;
  bool accumulate;  // sum post-op: c += alpha * a @ op(b)
  auto operator<=>(const PrimitiveKey&) const = default;
};

// An empty primitive means oneDNN has no kernel for this problem on this CPU.
struct Primitive {
  std::optional<dn::matmul::primitive_desc> pd;
  std::optional<dn::matmul> prim;
};

// Decoder steps and prefill lengths change m; past this many shapes the cache restarts
// rather than growing without bound.
constexpr size_t kMaxCachedPrimitives = 4096;

dn::memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::f32: return dn::memory::data_type::f32;
    case DType::bf16: return dn::memory::data_type::bf16;
    case DType::f16: return dn::memory::data_type::f16;
    default: return dn::memory::data_type::undef;
  }
}

Primitive create(const PrimitiveKey& key) {
  using tag = dn::memory::format_tag;
  const bool b3 = key.batch > 0;
  const dn::memory::dims src =
      b3 ? dn::memory::dims{key.batch, key.m, key.k} : dn::memory::dims{key.m, key.k};
  const dn::memory::dims wei =
      b3 ? dn::memory::dims{key.batch, key.k, key.n} : dn::memory::dims{key.k, key.n};
  const dn::memory::dims dst =
      b3 ? dn::memory::dims{key.batch, key.m, key.n} : dn::memory::dims{key.m, key.n};
  const dn::memory::dims bias = b3 ? dn::memory::dims{1, 1, key.n} : dn::memory::dims{1, key.n};
  const tag plain = b3 ? tag::abc : tag::ab;
  // b with trans_b is [.., N, K] in memory: logical [.., K, N] with K the faster dim.
  const tag wei_tag = key.trans_b ? (b3 ? tag::acb : tag::ba) : plain;
  const dn::memory::desc src_md(src, dnnl_type(key.ab), plain);
  const dn::memory::desc wei_md(wei, dnnl_type(key.ab), wei_tag);
  const dn::memory::desc dst_md(dst, dnnl_type(key.c), plain);
  dn::primitive_attr attr;
  // The scratchpad is ours (scratchpad()): a cached primitive runs on whichever thread asks,
  // several at once in the server's workers, and oneDNN's own scratchpad (with Debian's
  // default DNNL_ENABLE_CONCURRENT_EXEC=OFF, one shared by every primitive of the creating
  // thread) is not safe for that: concurrent transcriptions got each other's partial sums.
  attr.set_scratchpad_mode(dn::scratchpad_mode::user);
  const float alpha = std::bit_cast<float>(key.alpha_bits);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (key.accumulate) {
    dn::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  Primitive p;
  try {
    const dn::matmul::desc desc =
        key.native_bias
            ? dn::matmul::desc(src_md, wei_md, dn::memory::desc(bias, dnnl_type(key.bias), plain),
                               dst_md)
            : dn::matmul::desc(src_md, wei_md, dst_md);
    p.pd.emplace(desc, attr, onednn_engine());
    p.prim.emplace(*p.pd);
  } catch (const dn::error& e) {
    if (e.status != dnnl_unimplemented)
      throw Error(ErrorKind::internal, std::string("[matmul] oneDNN: ") + e.what());
    p = Primitive{};
  }
  return p;
}

// Runs the GEMM with oneDNN if it has a kernel for these dtypes; false if not.
bool gemm_native(const Gemm& g, const Tensor& a, const Tensor& b, Tensor& c,
                 const MatmulOptions& opt) {
  if (a.dtype() == DType::f16) return false;  // oneDNN has f16 kernels on AVX512-FP16 only
  const bool native_bias = opt.bias && opt.alpha == 1.0f && opt.beta == 0.0f;
  const bool accumulate = !native_bias && (opt.bias || opt.beta != 0.0f);
  const PrimitiveKey key{.batch = g.batch,
                         .m = g.m,
                         .n = g.n,
                         .k = g.k,
                         .trans_b = g.trans_b,
                         .ab = a.dtype(),
                         .c = c.dtype(),
                         .native_bias = native_bias,
                         .bias = native_bias ? opt.bias->dtype() : DType::f32,
                         .alpha_bits = std::bit_cast<uint32_t>(opt.alpha),
                         .accumulate = accumulate};
  const Primitive p = onednn_cached<PrimitiveKey, Primitive>(key, kMaxCachedPrimitives,
                                                             [&] { return create(key); });
  if (!p.prim) return false;
  if (accumulate) prefill(c, opt.bias, opt.beta);
  dn::engine& eng = onednn_engine();
  // oneDNN takes non-const handles; it only reads src, weights and bias.
  dn::memory src(p.pd->src_desc(), eng, const_cast<void*>(a.raw()));
  dn::memory wei(p.pd->weights_desc(), eng, const_cast<void*>(b.raw()));
  dn::memory dst(p.pd->dst_desc(), eng, c.raw());
  std::unordered_map<int, dn::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (native_bias)
    args.emplace(DNNL_ARG_BIAS,
                 dn::memory(p.pd->bias_desc(), eng, const_cast<void*>(opt.bias->raw())));
  onednn_execute(*p.prim, *p.pd, std::move(args), "[matmul]");
  return true;
}

#else  // PARLEY_GEMM_OPENBLAS

bool gemm_native(const Gemm& g, const Tensor& a, const Tensor& b, Tensor& c,
                 const MatmulOptions& opt) {
  if (a.dtype() != DType::f32 || c.dtype() != DType::f32 ||
      (opt.bias && opt.bias->dtype() != DType::f32))
    return false;
  check(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX, ErrorKind::unsupported,
        "[matmul] dimensions beyond OpenBLAS's int range");
  const bool accumulate = opt.bias || opt.beta != 0.0f;
  if (accumulate) prefill(c, opt.bias, opt.beta);
  const int m = int(g.m), n = int(g.n), k = int(g.k);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  for (int64_t i = 0; i < std::max<int64_t>(g.batch, 1); ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                opt.alpha, pa + i * g.m * g.k, k, pb + i * g.k * g.n, g.trans_b ? k : n,
                accumulate ? 1.0f : 0.0f, pc + i * g.m * g.n, n);
  return true;
}

#endif

Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::f32) return t;
  Tensor f = Tensor::empty(t.shape(), DType::f32);
  cpu::convert(t, f);
  return f;
}

}  // namespace

const char* gemm_provider() {
#if defined(PARLEY_GEMM_ONEDNN)
  return "onednn";
#else
  return "openblas";
#endif
}

namespace {

// Batch-invariant f32 GEMM (MatmulOptions::batch_invariant): c[m, n] = alpha * dot(a row m,
// b row n) + bias[n] + beta * c[m, n], each dot as eight lane sums over K in steps of 8 (one
// FMA chain per lane, in k order), then hsum8, then the K % 8 tail in k order; a tile of R
// rows x C columns only shares loads, so every output is the same operations whatever M, the
// tile or the thread. Nothing is allocated.
struct Epilogue {
  float alpha, beta;
  const float* bias;  // [N] or null
};

template <int R, int C>
PARLEY_AVX2 void dot_tile(const float* a, const float* b, int64_t k, float* out, int64_t ldo,
                          const Epilogue& e, int64_t col) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t k8 = k / 8 * 8;
  for (int64_t i = 0; i < k8; i += 8) {
    __m256 bv[C];
    for (int c = 0; c < C; ++c) bv[c] = _mm256_loadu_ps(b + c * k + i);
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_loadu_ps(a + r * k + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(av, bv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = hsum8(acc[r][c]);
      for (int64_t i = k8; i < k; ++i) s = std::fma(a[r * k + i], b[c * k + i], s);
      float& o = out[r * ldo + c];
      const float old = e.beta != 0.0f ? e.beta * o : 0.0f;
      o = e.alpha * s + (e.bias ? e.bias[col + c] : 0.0f) + old;
    }
}

// Rows i..i+R of c over columns [n0, n1): tiles of C columns (the R x C accumulators and
// C weight vectors within the 16 registers), then single columns.
template <int R>
void tile_rows(const float* a, const float* b, float* c, int64_t i, int64_t n0, int64_t n1,
               int64_t n, int64_t k, const Epilogue& e) {
  constexpr int C = R >= 4 ? 3 : 4;
  int64_t j = n0;
  for (; j + C <= n1; j += C) dot_tile<R, C>(a + i * k, b + j * k, k, c + i * n + j, n, e, j);
  for (; j < n1; ++j) dot_tile<R, 1>(a + i * k, b + j * k, k, c + i * n + j, n, e, j);
}

// Rows in tiles of 4 (then the 3, 2 or 1 left); threads split the columns in groups of 4.
void gemm_invariant(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
                    const Epilogue& e) {
  const int64_t quads = (n + 3) / 4;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(k, 1));
  // A thread walks its columns in blocks of about 128 KiB of b (a multiple of both tile
  // widths), each against every row tile, so the block stays in L2 while a's rows stream
  // (blocking moves no arithmetic). Below 4 rows b is read once anyway: no blocks.
  const int64_t block =
      m < 4 ? n : std::max<int64_t>(12, (int64_t(1) << 15) / std::max<int64_t>(k, 1) / 12 * 12);
  cpu_threads().parallel_for(quads, grain, [&](int64_t q0, int64_t q1) {
    for (int64_t n0 = q0 * 4, end = std::min(n, q1 * 4); n0 < end; n0 += block) {
      const int64_t n1 = std::min(end, n0 + block);
      int64_t i = 0;
      for (; i + 4 <= m; i += 4) tile_rows<4>(a, b, c, i, n0, n1, n, k, e);
      if (m - i == 3) tile_rows<3>(a, b, c, i, n0, n1, n, k, e);
      if (m - i == 2) tile_rows<2>(a, b, c, i, n0, n1, n, k, e);
      if (m - i == 1) tile_rows<1>(a, b, c, i, n0, n1, n, k, e);
    }
  });
}

// Whether gemm_invariant takes this problem (see MatmulOptions::batch_invariant).
bool invariant_case(const Gemm& g, const Tensor& a, const Tensor& b, const Tensor& c,
                    const MatmulOptions& opt) {
  return opt.batch_invariant && !opt.gelu && !opt.norm && g.batch == 0 && g.trans_b && g.k > 0 &&
         a.dtype() == DType::f32 && b.dtype() == DType::f32 && c.dtype() == DType::f32 &&
         (!opt.bias || opt.bias->dtype() == DType::f32) && cpu_has_avx2();
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  const Gemm g = describe(a, b, opt);
  if (c.numel() == 0) return;
  if (invariant_case(g, a, b, c, opt)) {
    gemm_invariant(a.data<float>(), b.data<float>(), c.data<float>(), g.m, g.n, g.k,
                   {opt.alpha, opt.beta, opt.bias ? opt.bias->data<float>() : nullptr});
    return;
  }
  if (g.k == 0) {  // an empty product: only bias and beta * c remain
    prefill(c, opt.bias, opt.beta);
    return;
  }
  if (gemm_native(g, a, b, c, opt)) return;
  // No kernel for these dtypes: run in f32 and convert c back.
  const Tensor af = as_f32(a), bf = as_f32(b);
  Tensor cf = c.dtype() == DType::f32 ? c
              : opt.beta != 0.0f      ? as_f32(c)
                                      : Tensor::empty(c.shape(), DType::f32);
  Tensor bias_f;
  MatmulOptions o = opt;
  if (opt.bias) {
    bias_f = as_f32(*opt.bias);
    o.bias = &bias_f;
  }
  check(gemm_native(g, af, bf, cf, o), ErrorKind::internal,
        std::string("[matmul] ") + gemm_provider() + " has no f32 GEMM for this problem");
  if (c.dtype() != DType::f32) cpu::convert(cf, c);
}

}  // namespace parley::cpu
