// advance_timestamp_rule on CUDA (ops/timestamp_rule.h): one thread per sequence, running the
// step the CPU runs (ops/timestamp_rule_impl.h). The greedy chain does not launch it: its
// masked_topk runs the same step as it emits the choice (reduce.cu, masked_topk's advance),
// which saves a tiny kernel between a step's choice and the next step.
#include "engine/cuda/common.cuh"
#include "engine/ops/timestamp_rule.h"
#include "engine/ops/timestamp_rule_impl.h"

namespace parley::cuda {

namespace {

__global__ void advance_timestamp_rule_kernel(const int32_t* chosen, const int32_t* state,
                                              int32_t* next_state, int32_t* tokens, int32_t* rules,
                                              int64_t n, int width, TimestampRuleParams params) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= n) return;
  detail::advance_timestamp_rule_one(chosen[r], state + r * kTimestampRuleState,
                                     next_state + r * kTimestampRuleState, tokens + r,
                                     rules + r * width, width, params);
}

}  // namespace

void advance_timestamp_rule(const Tensor& chosen, const Tensor& state, Tensor& next_state,
                            Tensor& tokens, Tensor& rules, const TimestampRuleParams& params) {
  const int64_t n = state.dim(0);
  constexpr int kThreads = 128;
  check_rows((n + kThreads - 1) / kThreads, "advance_timestamp_rule");
  advance_timestamp_rule_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, stream()>>>(
      chosen.data<int32_t>(), state.data<int32_t>(), next_state.data<int32_t>(),
      tokens.data<int32_t>(), rules.data<int32_t>(), n, int(rules.dim(1)), params);
  check_launch("advance_timestamp_rule");
}

}  // namespace parley::cuda
