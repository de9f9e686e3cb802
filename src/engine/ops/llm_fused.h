// Fused chat-model ops for the CUDA fast path: each is what a short sequence of plain ops
// computes (its CPU version is that sequence, the oracle of the op tests), in one launch,
// so that a decode step queues fewer, fuller kernels.
//   add_rms_norm(h, y, gamma, eps, out):  h = h + y (rounded to h's dtype, as add),
//       out = rms_norm(h, gamma, eps): the residual add before a layer's next norm.
//   qkv_rope_write(qkv, ...): from a fused q|k|v projection qkv [T, (Hq + 2 Hkv) D],
//       q_out [T, Hq, D] = rope(q_norm(q)), and the token's rope(k_norm(k)) and v written
//       to the paged caches at slots[t] (paged_kv_write): rms_norm per head (optional:
//       q_norm / k_norm [D], Qwen3 and Gemma 3), then rope (ops/rope.h), then the writes.
//   glu_halves(gate_up, act, out):  out = glu(gate_up[:, :I], gate_up[:, I:]) for
//       gate_up [T, 2I] (a fused gate|up projection), out [T, I].
// dtypes: f32 on the CPU; f32, f16 or bf16 on CUDA (every value in f32, rounded once per
// stored result, as the plain ops round them).
#pragma once

#include "engine/ops/glu.h"
#include "engine/tensor.h"

namespace parley {

void add_rms_norm(Tensor& h, const Tensor& y, const Tensor& gamma, float eps, Tensor& out);

struct QkvRope {
  int64_t n_q_heads = 0, n_kv_heads = 0;
  const Tensor* q_norm = nullptr;  // [D] or null
  const Tensor* k_norm = nullptr;  // [D] or null
  float eps = 1e-6f;
  const Tensor* positions = nullptr;  // i32 [T]
  const Tensor* inv_freq = nullptr;   // f32 [D / 2]
  const Tensor* slots = nullptr;      // i32 [T]
};
void qkv_rope_write(const Tensor& qkv, const QkvRope& args, Tensor& q_out, Tensor& k_cache,
                    Tensor& v_cache);

void glu_halves(const Tensor& gate_up, GluActivation act, Tensor& out);

namespace cpu {
void add_rms_norm(Tensor& h, const Tensor& y, const Tensor& gamma, float eps, Tensor& out);
void qkv_rope_write(const Tensor& qkv, const QkvRope& args, Tensor& q_out, Tensor& k_cache,
                    Tensor& v_cache);
void glu_halves(const Tensor& gate_up, GluActivation act, Tensor& out);
}  // namespace cpu
namespace cuda {
void add_rms_norm(Tensor& h, const Tensor& y, const Tensor& gamma, float eps, Tensor& out);
void qkv_rope_write(const Tensor& qkv, const QkvRope& args, Tensor& q_out, Tensor& k_cache,
                    Tensor& v_cache);
void glu_halves(const Tensor& gate_up, GluActivation act, Tensor& out);
}  // namespace cuda

}  // namespace parley
