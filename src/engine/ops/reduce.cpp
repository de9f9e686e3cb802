// Public argmax / topk over the last dimension: argument checks, then CPU or CUDA.
#include "engine/ops/reduce.h"

#include <algorithm>

#include "engine/ops/matmul.h"
#include "engine/ops/op_checks.h"

namespace parley {

namespace {

void check_rows(std::string_view op, const Tensor& x) {
  detail::check_float(op, "x", x);
  detail::require(x.ndim() == 2 && x.dim(1) >= 1, op,
                  [&] { return detail::arg_str("x", x) + ": expected [N, V] with V >= 1"; });
}

}  // namespace

void argmax(const Tensor& x, Tensor& out) {
  constexpr std::string_view op = "argmax";
  const Device dev = detail::check_args(op, {{"x", &x}, {"out", &out}});
  check_rows(op, x);
  detail::require(out.dtype() == DType::i32 && out.shape() == Shape{x.dim(0)}, op, [&] {
    return detail::arg_str("out", out) + " must be i32[" + std::to_string(x.dim(0)) + "] for " +
           detail::arg_str("x", x);
  });
  if (dev == Device::cuda)
    cuda::argmax(x, out);
  else
    cpu::argmax(x, out);
}

void topk(const Tensor& x, int k, Tensor& values, Tensor& indices) {
  constexpr std::string_view op = "topk";
  const Device dev =
      detail::check_args(op, {{"x", &x}, {"values", &values}, {"indices", &indices}});
  check_rows(op, x);
  detail::require(k >= 1 && k <= x.dim(1), op, [&] {
    return "k = " + std::to_string(k) + " is outside [1, " + std::to_string(x.dim(1)) + "] for " +
           detail::arg_str("x", x);
  });
  const Shape want{x.dim(0), k};
  detail::require(values.dtype() == x.dtype() && values.shape() == want, op, [&] {
    return detail::arg_str("values", values) + " must be " + std::string(dtype_name(x.dtype())) +
           want.str();
  });
  detail::require(indices.dtype() == DType::i32 && indices.shape() == want, op, [&] {
    return detail::arg_str("indices", indices) + " must be i32" + want.str();
  });
  if (dev == Device::cuda)
    cuda::topk(x, k, values, indices);
  else
    cpu::topk(x, k, values, indices);
}

namespace {

// masked_topk's argument checks, errors under `op`; returns the device.
Device check_masked_topk(std::string_view op, const Tensor& x, const Tensor* mask,
                         const Tensor& rules, int k, const Tensor& logprobs, const Tensor& indices,
                         const TimestampRuleAdvance* advance) {
  const Device dev = detail::check_args(op, {{"x", &x},
                                             {"mask", mask},
                                             {"rules", &rules},
                                             {"logprobs", &logprobs},
                                             {"indices", &indices}});
  detail::require(x.dtype() == DType::f32 && x.ndim() == 2 && x.dim(1) >= 1, op,
                  [&] { return detail::arg_str("x", x) + ": expected f32 [N, V] with V >= 1"; });
  const int64_t n = x.dim(0), v = x.dim(1);
  detail::require(k >= 1 && k <= std::min<int64_t>(v, kMaskedTopKMax), op, [&] {
    return "k = " + std::to_string(k) + " is outside [1, " +
           std::to_string(std::min<int64_t>(v, kMaskedTopKMax)) + "] for " +
           detail::arg_str("x", x);
  });
  detail::require(!mask || (mask->dtype() == DType::i8 && mask->shape() == Shape{v}), op, [&] {
    return detail::arg_str("mask", *mask) + " must be i8[" + std::to_string(v) + "]";
  });
  detail::require(rules.dtype() == DType::i32 && rules.ndim() == 2 && rules.dim(0) == n &&
                      rules.dim(1) % 2 == 1 && rules.dim(1) <= 1 + 2 * kMaskedTopKMaxRanges,
                  op, [&] {
                    return detail::arg_str("rules", rules) + " must be i32[" + std::to_string(n) +
                           ", 1 + 2R] with R <= " + std::to_string(kMaskedTopKMaxRanges);
                  });
  const Shape want{n, k};
  detail::require(logprobs.dtype() == DType::f32 && logprobs.shape() == want, op, [&] {
    return detail::arg_str("logprobs", logprobs) + " must be f32" + want.str();
  });
  detail::require(indices.dtype() == DType::i32 && indices.shape() == want, op, [&] {
    return detail::arg_str("indices", indices) + " must be i32" + want.str();
  });
  if (const TimestampRuleAdvance* a = advance) {
    detail::require(k == 1, op, [&] { return "advance needs k = 1, got " + std::to_string(k); });
    detail::require(a->state && a->next_state && a->tokens && a->rules, op, [&] {
      return std::string("advance needs state, next_state, tokens and rules");
    });
    const Device at = detail::check_timestamp_rule(op, indices, *a->state, *a->next_state,
                                                   *a->tokens, *a->rules, a->params);
    detail::require(at == dev, op, [&] { return std::string("advance is on another device"); });
    const Tensor* outputs[] = {a->next_state, a->tokens, a->rules};
    for (const Tensor* o : outputs)
      detail::require(!detail::overlap(*o, x) && !(mask && detail::overlap(*o, *mask)) &&
                          !detail::overlap(*o, rules) && !detail::overlap(*o, logprobs),
                      op, [&] {
                        return "advance's " + detail::arg_str("output", *o) +
                               " overlaps x, mask, rules or logprobs";
                      });
  }
  return dev;
}

}  // namespace

void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices, const TimestampRuleAdvance* advance) {
  const Device dev =
      check_masked_topk("masked_topk", x, mask, rules, k, logprobs, indices, advance);
  if (dev == Device::cuda) {
    cuda::masked_topk(x, mask, rules, k, logprobs, indices, advance);
  } else {
    cpu::masked_topk(x, mask, rules, k, logprobs, indices);
    if (const TimestampRuleAdvance* a = advance)
      cpu::advance_timestamp_rule(indices, *a->state, *a->next_state, *a->tokens, *a->rules,
                                  a->params);
  }
}

void matmul_masked_top1(const Tensor& a, const Tensor& b, Tensor& logits, const MatmulOptions& opt,
                        const Tensor* mask, const Tensor& rules, Tensor& logprobs, Tensor& indices,
                        const TimestampRuleAdvance* advance) {
  constexpr std::string_view op = "matmul_masked_top1";
  detail::require(logits.ndim() == 2 && logits.dim(0) == 1, op,
                  [&] { return detail::arg_str("logits", logits) + ": expected one row [1, V]"; });
  const Device dev = detail::check_matmul(op, a, b, logits, opt);
  check_masked_topk(op, logits, mask, rules, 1, logprobs, indices, advance);
  const auto outside = [&](const Tensor& t) {
    return !detail::overlap(t, logits) && !detail::overlap(t, a) && !detail::overlap(t, b);
  };
  detail::require(outside(logprobs) && outside(indices), op, [] {
    return std::string("logprobs and indices must not share memory with a, b or logits");
  });
  if (dev == Device::cuda &&
      cuda::matmul_masked_top1(a, b, logits, opt, mask, rules, logprobs, indices, advance))
    return;
  matmul(a, b, logits, opt);
  masked_topk(logits, mask, rules, 1, logprobs, indices, advance);
}

}  // namespace parley
