// CPU matmul_i8 (ops/int8_matmul.h): a's rows quantized to u8 with one scale a row, the
// integer sums by oneDNN's u8 x s8 -> s32 GEMM (or plain loops: the reference and OpenBLAS
// builds), then one pass per row that scales, corrects for the +64, adds the bias, applies
// the GELU and accumulates. Scratch (the u8 rows, their scales, the int32 sums) lives in
// thread-local buffers that grow and never shrink.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "engine/cpu/avx2.h"
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/onednn.h"
#include "engine/cpu/vec_math.h"
#include "engine/error.h"
#include "engine/ops/int8_matmul.h"

namespace parley::cpu {

namespace {

constexpr int kWeightLevels = 127;     // |q| of a weight
constexpr int kActivationLevels = 63;  // |u - kZero| of an activation (7 bits: int8_matmul.h)
constexpr int kZero = 64;              // the activations' offset into u8

struct Scratch {
  std::vector<uint8_t> u;    // [M, K]
  std::vector<float> t;      // [M]
  std::vector<int32_t> acc;  // [M, N]
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

float max_abs_scalar(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// u[i] = round(x[i] * id) + 64 (round half to even, as nearbyint), x[i] * id in [-63, 63].
void offset_round_scalar(const float* x, float id, uint8_t* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) u[i] = uint8_t(int(std::nearbyint(x[i] * id)) + kZero);
}

PARLEY_AVX2 void offset_round_avx2(const float* x, float id, uint8_t* u, int64_t n) {
  const __m256 mul = _mm256_set1_ps(id);
  const __m256i zero = _mm256_set1_epi32(kZero);
  // The packs interleave 128-bit lanes; the permute puts the 4-byte groups back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), mul);
      v[j] = _mm256_add_epi32(
          _mm256_cvtps_epi32(_mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
          zero);
    }
    const __m256i p =
        _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + i), _mm256_permutevar8x32_epi32(p, order));
  }
  offset_round_scalar(x + i, id, u + i, n - i);
}

// Row i of a into u [.., K] and its scale t[i].
void quantize_activations(const float* a, int64_t m, int64_t k, uint8_t* u, float* t) {
  const bool avx2 = cpu_has_avx2();
  cpu_threads().parallel_for(m, row_grain(2 * k), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* x = a + i * k;
      const float amax = avx2 ? max_abs(x, k) : max_abs_scalar(x, k);
      t[i] = amax / float(kActivationLevels);
      const float id = amax > 0.0f ? float(kActivationLevels) / amax : 0.0f;
      if (avx2)
        offset_round_avx2(x, id, u + i * k, k);
      else
        offset_round_scalar(x, id, u + i * k, k);
    }
  });
}

// acc [M, N] = u [M, K] @ q [N, K]^T in plain loops (exact int32).
void sums_reference(const uint8_t* u, const int8_t* q, int64_t m, int64_t n, int64_t k,
                    int32_t* acc) {
  cpu_threads().parallel_for(m, row_grain(n * k), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int32_t s = 0;
        const uint8_t* ui = u + i * k;
        const int8_t* qj = q + j * k;
        for (int64_t l = 0; l < k; ++l) s += int32_t(ui[l]) * int32_t(qj[l]);
        acc[i * n + j] = s;
      }
  });
}

// y[j] = t * scale[j] * (acc[j] - 64 colsum[j]) (+ bias[j]), then the GELU where asked.
void dequantize_row(const int32_t* acc, const int32_t* colsum, const float* scale, float t,
                    const float* bias, int64_t n, bool gelu, float* y) {
  for (int64_t j = 0; j < n; ++j) y[j] = float(acc[j] - kZero * colsum[j]) * (t * scale[j]);
  if (bias)
    for (int64_t j = 0; j < n; ++j) y[j] += bias[j];
  if (gelu) gelu_f32(y, y, n);
}

#if defined(PARLEY_GEMM_ONEDNN)
namespace dn = dnnl;

struct Key {
  int64_t m, n, k;
  auto operator<=>(const Key&) const = default;
};

struct Primitive {
  dn::matmul::primitive_desc pd;
  dn::matmul prim;
};

// Encoder batches change m; past this many shapes the cache restarts.
constexpr size_t kMaxCached = 256;

Primitive create(const Key& key) {
  using tag = dn::memory::format_tag;
  using dt = dn::memory::data_type;
  const dn::memory::desc src({key.m, key.k}, dt::u8, tag::ab);
  const dn::memory::desc wei({key.k, key.n}, dt::s8, tag::ba);  // q [N, K] row-major
  const dn::memory::desc dst({key.m, key.n}, dt::s32, tag::ab);
  dn::primitive_attr attr;
  attr.set_scratchpad_mode(dn::scratchpad_mode::user);  // onednn_execute's scratchpad
  try {
    dn::matmul::primitive_desc pd(dn::matmul::desc(src, wei, dst), attr, onednn_engine());
    return Primitive{pd, dn::matmul(pd)};
  } catch (const dn::error& e) {
    throw Error(ErrorKind::internal, std::string("[matmul_i8] oneDNN: ") + e.what());
  }
}

void sums_onednn(const uint8_t* u, const int8_t* q, int64_t m, int64_t n, int64_t k, int32_t* acc) {
  const Key key{m, n, k};
  const Primitive p = onednn_cached<Key, Primitive>(key, kMaxCached, [&] { return create(key); });
  dn::engine& eng = onednn_engine();
  // oneDNN takes non-const handles; it only reads src and weights.
  onednn_execute(p.prim, p.pd,
                 {{DNNL_ARG_SRC, dn::memory(p.pd.src_desc(), eng, const_cast<uint8_t*>(u))},
                  {DNNL_ARG_WEIGHTS, dn::memory(p.pd.weights_desc(), eng, const_cast<int8_t*>(q))},
                  {DNNL_ARG_DST, dn::memory(p.pd.dst_desc(), eng, acc)}},
                 "[matmul_i8]");
}
#endif

}  // namespace

bool matmul_i8_native() {
#if defined(PARLEY_GEMM_ONEDNN)
  return true;
#else
  return false;
#endif
}

RowInt8 quantize_row_int8(const Tensor& w) {
  const int64_t n = w.dim(0), k = w.dim(1);
  RowInt8 r{Tensor::empty({n, k}, DType::i8, Device::cpu),
            Tensor::empty({n}, DType::f32, Device::cpu),
            Tensor::empty({n}, DType::i32, Device::cpu)};
  const float* src = w.data<float>();
  int8_t* q = r.q.data<int8_t>();
  float* scale = r.scale.data<float>();
  int32_t* colsum = r.colsum.data<int32_t>();
  cpu_threads().parallel_for(n, row_grain(2 * k), [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const float* x = src + j * k;
      const float amax = max_abs_scalar(x, k);
      scale[j] = amax / float(kWeightLevels);
      const float id = amax > 0.0f ? float(kWeightLevels) / amax : 0.0f;
      int32_t sum = 0;
      for (int64_t l = 0; l < k; ++l) {
        const int v = std::clamp(int(std::nearbyint(x[l] * id)), -kWeightLevels, kWeightLevels);
        q[j * k + l] = int8_t(v);
        sum += v;
      }
      colsum[j] = sum;
    }
  });
  return r;
}

void matmul_i8(const Tensor& a, const RowInt8& w, Tensor& c, const MatmulI8Options& opt) {
  const int64_t m = a.dim(0), n = w.q.dim(0), k = w.q.dim(1);
  Scratch& s = scratch();
  if (s.u.size() < size_t(m * k)) s.u.resize(size_t(m * k));
  if (s.t.size() < size_t(m)) s.t.resize(size_t(m));
  if (s.acc.size() < size_t(m * n)) s.acc.resize(size_t(m * n));
  quantize_activations(a.data<float>(), m, k, s.u.data(), s.t.data());
  const int8_t* q = w.q.data<int8_t>();
#if defined(PARLEY_GEMM_ONEDNN)
  if (!opt.reference)
    sums_onednn(s.u.data(), q, m, n, k, s.acc.data());
  else
#endif
    sums_reference(s.u.data(), q, m, n, k, s.acc.data());

  const float* scale = w.scale.data<float>();
  const int32_t* colsum = w.colsum.data<int32_t>();
  const float* bias = opt.bias ? opt.bias->data<float>() : nullptr;
  const int32_t* acc = s.acc.data();
  const float* t = s.t.data();
  float* pc = c.data<float>();
  cpu_threads().parallel_for(m, row_grain(4 * n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* ci = pc + i * n;
      if (opt.beta != 0.0f) {
        thread_local std::vector<float> row;
        if (row.size() < size_t(n)) row.resize(size_t(n));
        dequantize_row(acc + i * n, colsum, scale, t[i], bias, n, opt.gelu, row.data());
        for (int64_t j = 0; j < n; ++j) ci[j] = row[size_t(j)] + opt.beta * ci[j];
      } else {
        dequantize_row(acc + i * n, colsum, scale, t[i], bias, n, opt.gelu, ci);
      }
    }
  });
}

}  // namespace parley::cpu
