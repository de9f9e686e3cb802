// Public scaled dot-product attention: shape, dtype and mask checks, then CPU or CUDA.
#include "engine/ops/attention.h"

#include "engine/ops/op_checks.h"

namespace parley {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt) {
  constexpr std::string_view op = "attention";
  const Device dev = detail::check_args(
      op, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"key_mask", opt.key_mask}});
  detail::check_float(op, "q", q);
  for (const detail::Arg& a : {detail::Arg{"k", &k}, {"v", &v}, {"out", &out}})
    detail::require(
        a.t->dtype() == q.dtype(), op,
        detail::arg_str("q", q) + " and " + detail::arg_str(a.name, *a.t) + ": dtypes differ");
  for (const detail::Arg& a : {detail::Arg{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}})
    detail::require(a.t->ndim() == 4, op,
                    detail::arg_str(a.name, *a.t) + ": expected 4 dimensions [B, H, L, D]");
  const int64_t b = q.dim(0), h = q.dim(1), lq = q.dim(2), d = q.dim(3), lk = k.dim(2);
  detail::require(k.dim(0) == b && k.dim(1) == h && k.dim(3) == d, op,
                  detail::arg_str("q", q) + " and " + detail::arg_str("k", k) +
                      ": expected k [B, H, Lk, D] with q's B, H and D");
  detail::require(v.dim(0) == b && v.dim(1) == h && v.dim(2) == lk, op,
                  detail::arg_str("k", k) + " and " + detail::arg_str("v", v) +
                      ": expected v [B, H, Lk, Dv] with k's B, H and Lk");
  detail::check_shape(op, "out", out, Shape{b, h, lq, v.dim(3)});
  if (opt.key_mask) {
    detail::check_dtype(op, "key_mask", *opt.key_mask, DType::i8);
    detail::check_shape(op, "key_mask", *opt.key_mask, Shape{b, lk});
  }
  if (dev == Device::cuda)
    cuda::attention(q, k, v, out, opt);
  else
    cpu::attention(q, k, v, out, opt);
}

}  // namespace parley
