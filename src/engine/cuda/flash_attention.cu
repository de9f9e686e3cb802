// attention_qkv on CUDA (ops/attention.h): a flash-style self-attention kernel for the
// Whisper encoder (L = 1500 positions, D = 64), reading q, k and v straight from the fused
// QKV projection [B, L, 3 * H * 64] and writing [B, L, H * 64], so the heads are never
// permuted and no [L, L] score matrix touches memory.
//
// One block of 4 warps per (64 query rows, head, batch); each warp owns 16 query rows.
// For every tile of 64 keys the block stages K and V in shared memory, then each warp:
//   S = Q K^T           tensor cores (WMMA 16x16x16, f32 accumulation) into shared memory
//   online softmax      2 lanes per row: the row max m and sum l are carried across tiles,
//                       P = exp2(S * scale * log2 e - m) in the input dtype, O *= exp2(m_old - m)
//   O += P V            tensor cores, O kept in shared memory as f32
// and finally out = O / l. Keys past L are -inf (P = 0) and their V rows zeros.
// Shared memory: Q, K, V tiles and each warp's P (16-bit, rows padded to 72 elements) and
// S and O (f32, rows of 68): 70 KiB, so three blocks fit on an SM.
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/cuda/common.cuh"
#include "engine/ops/attention.h"

namespace parley::cuda {

namespace {

using namespace nvcuda;

constexpr int kD = 64;   // head size
constexpr int kBQ = 64;  // query rows per block
constexpr int kBK = 64;  // keys per tile
constexpr int kWarpsFlash = kBQ / 16;
constexpr int kThreadsFlash = kWarpsFlash * 32;
constexpr int kLdT = kD + 8;   // 16-bit rows in shared memory (a multiple of 8 for WMMA)
constexpr int kLdF = kBK + 4;  // f32 rows (a multiple of 4); kBK == kD: S and O share it
static_assert(kBK == kD, "S and O share one row pitch");

constexpr size_t kTileBytes = size_t(kBQ) * kLdT * 2;                    // Q, K, V (and all P)
constexpr size_t kWarpFloatBytes = size_t(kWarpsFlash) * 16 * kLdF * 4;  // all S, all O
constexpr size_t kSmemBytes = 4 * kTileBytes + 2 * kWarpFloatBytes;

template <typename T>
__global__ void __launch_bounds__(kThreadsFlash)
    flash_qkv_kernel(const T* qkv, T* out, int64_t len, int heads, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kBQ * kLdT;
  T* v_s = k_s + kBK * kLdT;
  T* p_s = v_s + kBK * kLdT;
  float* s_s = reinterpret_cast<float*>(p_s + kWarpsFlash * 16 * kLdT);
  float* o_s = s_s + kWarpsFlash * 16 * kLdF;

  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int64_t q0 = int64_t(blockIdx.x) * kBQ;
  const int h = int(blockIdx.y);
  const int64_t b = blockIdx.z;
  const int64_t hd = int64_t(heads) * kD, row_stride = 3 * hd;
  const T* base = qkv + b * len * row_stride + int64_t(h) * kD;

  // Rows [r0, r0 + 64) of column block `col` (0: q, hd: k, 2 hd: v) into dst, 16 bytes
  // a load; rows past len are zeros.
  auto load_tile = [&](T* dst, int64_t r0, int64_t col) {
    for (int i = tid; i < 64 * (kD / 8); i += kThreadsFlash) {
      const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (r0 + r < len)
        val = *reinterpret_cast<const uint4*>(base + (r0 + r) * row_stride + col + c);
      *reinterpret_cast<uint4*>(dst + r * kLdT + c) = val;
    }
  };

  load_tile(q_s, q0, 0);
  T* p_w = p_s + warp * 16 * kLdT;
  float* s_w = s_s + warp * 16 * kLdF;
  float* o_w = o_s + warp * 16 * kLdF;
  const T* q_w = q_s + warp * 16 * kLdT;
  for (int i = lane; i < 16 * kLdF; i += 32) o_w[i] = 0.0f;
  const int r = lane >> 1, c0 = (lane & 1) * 32;  // this lane's row and 32 columns
  float m = -INFINITY, l = 0.0f;

  for (int64_t k0 = 0; k0 < len; k0 += kBK) {
    __syncthreads();  // the last tile's K and V are no longer read (and Q is loaded)
    load_tile(k_s, k0, hd);
    load_tile(v_s, k0, 2 * hd);
    __syncthreads();

    for (int kt = 0; kt < kBK / 16; ++kt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int dk = 0; dk < kD / 16; ++dk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bk;
        wmma::load_matrix_sync(a, q_w + dk * 16, kLdT);
        wmma::load_matrix_sync(bk, k_s + kt * 16 * kLdT + dk * 16, kLdT);
        wmma::mma_sync(acc, a, bk, acc);
      }
      wmma::store_matrix_sync(s_w + kt * 16, acc, kLdF, wmma::mem_row_major);
    }
    __syncwarp();

    const int64_t valid = len - k0;  // keys of this tile: min(kBK, valid), at least 1
    float s[32];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      s[j] = c0 + j < valid ? s_w[r * kLdF + c0 + j] * scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);  // finite: every tile has a valid key
    const float alpha = exp2f(m - m_new);    // 0 on the first tile (m = -inf)
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float p = exp2f(s[j] - m_new);
      sum += p;
      p_w[r * kLdT + c0 + j] = dev_from_f32<T>(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
#pragma unroll
    for (int j = 0; j < 32; ++j) o_w[r * kLdF + c0 + j] *= alpha;
    __syncwarp();

    for (int dt = 0; dt < kD / 16; ++dt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o_w + dt * 16, kLdF, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(a, p_w + kk * 16, kLdT);
        wmma::load_matrix_sync(bv, v_s + kk * 16 * kLdT + dt * 16, kLdT);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(o_w + dt * 16, acc, kLdF, wmma::mem_row_major);
    }
    __syncwarp();
  }

  const int64_t row = q0 + warp * 16 + r;
  if (row < len) {
    const float inv = 1.0f / l;
    T* o = out + (b * len + row) * hd + int64_t(h) * kD + c0;
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = dev_from_f32<T>(o_w[r * kLdF + c0 + j] * inv);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool attention_qkv_fused(const Tensor& qkv, int n_head, const AttentionOptions& opt) {
  if (qkv.dtype() != DType::f16 && qkv.dtype() != DType::bf16) return false;
  if (opt.causal || opt.key_mask) return false;
  const int64_t hd = qkv.dim(2) / 3;
  return hd == int64_t(n_head) * kD && n_head <= 65535 && qkv.dim(0) <= 65535 &&
         aligned16(qkv.raw()) && kSmemBytes <= shared_memory_optin();
}

void attention_qkv(const Tensor& qkv, int n_head, Tensor& out, const AttentionOptions& opt) {
  constexpr const char* kOp = "attention_qkv";
  const int64_t batch = qkv.dim(0), len = qkv.dim(1);
  const float scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(kD));
  const float scale_log2 = scale * 1.4426950408889634f;
  const int64_t blocks = (len + kBQ - 1) / kBQ;
  check(blocks <= int64_t(0x7fffffff), ErrorKind::unsupported,
        "[attention_qkv] L = " + std::to_string(len) + " exceeds the CUDA grid");
  dispatch_device_float(qkv.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      static const bool configured = [] {
        check_cuda(
            cudaFuncSetAttribute(flash_qkv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(kSmemBytes)),
            "cudaFuncSetAttribute (attention_qkv shared memory)");
        return true;
      }();
      (void)configured;
      const dim3 grid{unsigned(blocks), unsigned(n_head), unsigned(batch)};
      flash_qkv_kernel<T><<<grid, kThreadsFlash, kSmemBytes, stream()>>>(
          qkv.data<T>(), out.data<T>(), len, n_head, scale_log2);
    } else {
      throw Error(ErrorKind::internal, "[attention_qkv] no fused f32 kernel");
    }
  });
  check_launch(kOp);
}

}  // namespace parley::cuda
