// Fused chat-model ops: argument checks, then the CPU or CUDA implementation.
#include "engine/ops/llm_fused.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

// f32 on the CPU, any float type on CUDA.
void check_act(std::string_view op, const char* name, const Tensor& t, Device dev) {
  if (dev == Device::cpu)
    detail::check_dtype(op, name, t, DType::f32);
  else
    detail::check_float(op, name, t);
}

}  // namespace

void add_rms_norm(Tensor& h, const Tensor& y, const Tensor& gamma, float eps, Tensor& out) {
  constexpr std::string_view op = "add_rms_norm";
  const Device dev =
      detail::check_args(op, {{"h", &h}, {"y", &y}, {"gamma", &gamma}, {"out", &out}});
  check_act(op, "h", h, dev);
  detail::require(h.ndim() == 2, op, [&] { return detail::arg_str("h", h) + ": must be [T, D]"; });
  detail::check_dtype(op, "y", y, h.dtype());
  detail::check_shape(op, "y", y, h.shape());
  detail::check_dtype(op, "out", out, h.dtype());
  detail::check_shape(op, "out", out, h.shape());
  detail::check_param(op, "gamma", gamma, h.dim(1), h.dtype());
  if (dev == Device::cuda)
    cuda::add_rms_norm(h, y, gamma, eps, out);
  else
    cpu::add_rms_norm(h, y, gamma, eps, out);
}

void qkv_rope_write(const Tensor& qkv, const QkvRope& a, Tensor& q_out, Tensor& k_cache,
                    Tensor& v_cache) {
  constexpr std::string_view op = "qkv_rope_write";
  detail::require(a.positions && a.inv_freq && a.slots, op,
                  [] { return std::string("positions, inv_freq and slots are required"); });
  const Device dev = detail::check_args(op, {{"qkv", &qkv},
                                             {"q_out", &q_out},
                                             {"k_cache", &k_cache},
                                             {"v_cache", &v_cache},
                                             {"positions", a.positions},
                                             {"inv_freq", a.inv_freq},
                                             {"slots", a.slots},
                                             {"q_norm", a.q_norm},
                                             {"k_norm", a.k_norm}});
  check_act(op, "qkv", qkv, dev);
  detail::require(
      q_out.ndim() == 3 && q_out.dim(1) == a.n_q_heads && k_cache.ndim() == 4 &&
          k_cache.dim(2) == a.n_kv_heads && q_out.dim(2) == k_cache.dim(3) && q_out.dim(2) % 2 == 0,
      op, [&] {
        return detail::arg_str("q_out", q_out) + " and " + detail::arg_str("k_cache", k_cache) +
               " must be [T, Hq, D] and [n_blocks, block_size, Hkv, D], D even";
      });
  const int64_t t = qkv.dim(0), d = q_out.dim(2);
  detail::check_shape(op, "qkv", qkv, Shape{t, (a.n_q_heads + 2 * a.n_kv_heads) * d});
  detail::check_shape(op, "q_out", q_out, Shape{t, a.n_q_heads, d});
  detail::check_dtype(op, "q_out", q_out, qkv.dtype());
  detail::check_dtype(op, "k_cache", k_cache, qkv.dtype());
  detail::check_dtype(op, "v_cache", v_cache, qkv.dtype());
  detail::check_shape(op, "v_cache", v_cache, k_cache.shape());
  detail::check_dtype(op, "positions", *a.positions, DType::i32);
  detail::check_shape(op, "positions", *a.positions, Shape{t});
  detail::check_dtype(op, "slots", *a.slots, DType::i32);
  detail::check_shape(op, "slots", *a.slots, Shape{t});
  detail::check_dtype(op, "inv_freq", *a.inv_freq, DType::f32);
  detail::check_shape(op, "inv_freq", *a.inv_freq, Shape{d / 2});
  if (a.q_norm) detail::check_param(op, "q_norm", *a.q_norm, d, qkv.dtype());
  if (a.k_norm) detail::check_param(op, "k_norm", *a.k_norm, d, qkv.dtype());
  if (dev == Device::cuda) {
    cuda::qkv_rope_write(qkv, a, q_out, k_cache, v_cache);
    return;
  }
  const int64_t n_slots = k_cache.dim(0) * k_cache.dim(1);
  for (int64_t i = 0; i < t; ++i) {
    const int32_t s = a.slots->data<int32_t>()[i];
    detail::require(s >= 0 && s < n_slots, op, [&] {
      return "slot " + std::to_string(s) + " outside the cache's " + std::to_string(n_slots);
    });
  }
  cpu::qkv_rope_write(qkv, a, q_out, k_cache, v_cache);
}

void glu_halves(const Tensor& gate_up, GluActivation act, Tensor& out) {
  constexpr std::string_view op = "glu_halves";
  const Device dev = detail::check_args(op, {{"gate_up", &gate_up}, {"out", &out}});
  check_act(op, "gate_up", gate_up, dev);
  detail::require(gate_up.ndim() == 2 && gate_up.dim(1) % 2 == 0, op,
                  [&] { return detail::arg_str("gate_up", gate_up) + ": must be [T, 2I]"; });
  detail::check_dtype(op, "out", out, gate_up.dtype());
  detail::check_shape(op, "out", out, Shape{gate_up.dim(0), gate_up.dim(1) / 2});
  if (dev == Device::cuda)
    cuda::glu_halves(gate_up, act, out);
  else
    cpu::glu_halves(gate_up, act, out);
}

}  // namespace parley
