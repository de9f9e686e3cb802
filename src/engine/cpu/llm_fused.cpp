// The fused chat-model ops on the CPU: the plain ops they stand for, in order (the oracle of
// the CUDA kernels). add_rms_norm works in place; the other two copy their halves first.
#include "engine/ops/llm_fused.h"

#include <cstring>

#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/paged_attention.h"
#include "engine/ops/rope.h"

namespace parley::cpu {

void add_rms_norm(Tensor& h, const Tensor& y, const Tensor& gamma, float eps, Tensor& out) {
  cpu::binary(BinaryOp::add, h, y, h);
  cpu::rms_norm(h, gamma, eps, out);
}

void qkv_rope_write(const Tensor& qkv, const QkvRope& a, Tensor& q_out, Tensor& k_cache,
                    Tensor& v_cache) {
  const int64_t t = qkv.dim(0), d = q_out.dim(2), hq = a.n_q_heads, hkv = a.n_kv_heads;
  const int64_t w = qkv.dim(1);
  Tensor k = Tensor::empty({t, hkv, d}, DType::f32), v = Tensor::empty({t, hkv, d}, DType::f32);
  const float* src = qkv.data<float>();
  for (int64_t i = 0; i < t; ++i) {
    std::memcpy(q_out.data<float>() + i * hq * d, src + i * w, size_t(hq * d) * sizeof(float));
    std::memcpy(k.data<float>() + i * hkv * d, src + i * w + hq * d,
                size_t(hkv * d) * sizeof(float));
    std::memcpy(v.data<float>() + i * hkv * d, src + i * w + (hq + hkv) * d,
                size_t(hkv * d) * sizeof(float));
  }
  if (a.q_norm) {
    Tensor qf = q_out.reshape({t * hq, d});
    cpu::rms_norm(qf, *a.q_norm, a.eps, qf);
  }
  if (a.k_norm) {
    Tensor kf = k.reshape({t * hkv, d});
    cpu::rms_norm(kf, *a.k_norm, a.eps, kf);
  }
  cpu::rope(q_out, *a.positions, *a.inv_freq);
  cpu::rope(k, *a.positions, *a.inv_freq);
  cpu::paged_kv_write(k, v, *a.slots, k_cache, v_cache);
}

void glu_halves(const Tensor& gate_up, GluActivation act, Tensor& out) {
  const int64_t t = gate_up.dim(0), i = gate_up.dim(1) / 2;
  Tensor g = Tensor::empty({t, i}, DType::f32), u = Tensor::empty({t, i}, DType::f32);
  for (int64_t r = 0; r < t; ++r) {
    std::memcpy(g.data<float>() + r * i, gate_up.data<float>() + r * 2 * i,
                size_t(i) * sizeof(float));
    std::memcpy(u.data<float>() + r * i, gate_up.data<float>() + r * 2 * i + i,
                size_t(i) * sizeof(float));
  }
  cpu::glu(g, u, act, out);
}

}  // namespace parley::cpu
