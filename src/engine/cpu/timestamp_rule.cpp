// CPU advance_timestamp_rule (ops/timestamp_rule.h): the shared per-sequence step in a loop.
#include "engine/ops/timestamp_rule.h"

#include "engine/ops/timestamp_rule_impl.h"

namespace parley::cpu {

void advance_timestamp_rule(const Tensor& chosen, const Tensor& state, Tensor& next_state,
                            Tensor& tokens, Tensor& rules, const TimestampRuleParams& params) {
  const int64_t n = state.dim(0);
  const int width = int(rules.dim(1));
  for (int64_t r = 0; r < n; ++r)
    detail::advance_timestamp_rule_one(
        chosen.data<int32_t>()[r], state.data<int32_t>() + r * kTimestampRuleState,
        next_state.data<int32_t>() + r * kTimestampRuleState, tokens.data<int32_t>() + r,
        rules.data<int32_t>() + r * width, width, params);
}

}  // namespace parley::cpu
