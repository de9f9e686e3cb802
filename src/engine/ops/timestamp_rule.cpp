// Public advance_timestamp_rule: argument checks, then CPU or CUDA.
#include "engine/ops/timestamp_rule.h"

#include "engine/ops/op_checks.h"
#include "engine/ops/reduce.h"

namespace parley {

Device detail::check_timestamp_rule(std::string_view op, const Tensor& chosen, const Tensor& state,
                                    const Tensor& next_state, const Tensor& tokens,
                                    const Tensor& rules, const TimestampRuleParams& params) {
  const Device dev = detail::check_args(op, {{"chosen", &chosen},
                                             {"state", &state},
                                             {"next_state", &next_state},
                                             {"tokens", &tokens},
                                             {"rules", &rules}});
  for (const auto& [name, t] : {detail::Arg{"chosen", &chosen}, detail::Arg{"state", &state},
                                detail::Arg{"next_state", &next_state},
                                detail::Arg{"tokens", &tokens}, detail::Arg{"rules", &rules}})
    detail::check_dtype(op, name, *t, DType::i32);
  const int64_t n = state.ndim() == 2 ? state.dim(0) : -1;
  detail::require(n >= 0 && state.dim(1) == kTimestampRuleState, op, [&] {
    return detail::arg_str("state", state) + ": expected [N, " +
           std::to_string(kTimestampRuleState) + "]";
  });
  detail::check_shape(op, "next_state", next_state, state.shape());
  detail::require(chosen.numel() == n && (chosen.ndim() == 1 || chosen.ndim() == 2), op, [&] {
    return detail::arg_str("chosen", chosen) +
           ": expected [N] or [N, 1] for N = " + std::to_string(n);
  });
  detail::check_shape(op, "tokens", tokens, Shape{n});
  detail::require(rules.ndim() == 2 && rules.dim(0) == n && rules.dim(1) % 2 == 1 &&
                      rules.dim(1) >= 5 && rules.dim(1) <= 1 + 2 * kMaskedTopKMaxRanges,
                  op, [&] {
                    return detail::arg_str("rules", rules) + ": expected [" + std::to_string(n) +
                           ", W] with W odd in [5, " +
                           std::to_string(1 + 2 * kMaskedTopKMaxRanges) + "]";
                  });
  // Not a structured binding: clang before 16 (the fuzz build's) cannot capture one.
  for (const detail::Arg& arg : {detail::Arg{"next_state", &next_state},
                                 detail::Arg{"tokens", &tokens}, detail::Arg{"rules", &rules}})
    detail::require(!detail::overlap(*arg.t, chosen) && !detail::overlap(*arg.t, state), op,
                    [&] { return std::string(arg.name) + " overlaps chosen or state"; });
  detail::require(params.timestamp_begin > params.eot && params.eot > 0, op, [&] {
    return "eot " + std::to_string(params.eot) + " and timestamp_begin " +
           std::to_string(params.timestamp_begin) + ": expected 0 < eot < timestamp_begin";
  });
  return dev;
}

void advance_timestamp_rule(const Tensor& chosen, const Tensor& state, Tensor& next_state,
                            Tensor& tokens, Tensor& rules, const TimestampRuleParams& params) {
  const Device dev = detail::check_timestamp_rule("advance_timestamp_rule", chosen, state,
                                                  next_state, tokens, rules, params);
  if (state.dim(0) == 0) return;
  if (dev == Device::cuda)
    cuda::advance_timestamp_rule(chosen, state, next_state, tokens, rules, params);
  else
    cpu::advance_timestamp_rule(chosen, state, next_state, tokens, rules, params);
}

}  // namespace parley
