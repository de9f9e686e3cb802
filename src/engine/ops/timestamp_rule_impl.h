// Internal to the engine: advance_timestamp_rule's step for one sequence (ops/timestamp_rule.h),
// written once for the CPU loop (cpu/timestamp_rule.cpp) and the CUDA kernel
// (cuda/timestamp_rule.cu), so the two cannot drift apart.
#pragma once

#include <cstdint>

#include "engine/ops/timestamp_rule.h"

#if defined(__CUDACC__)
#define PARLEY_HOST_DEVICE __host__ __device__
#else
#define PARLEY_HOST_DEVICE
#endif

namespace parley::detail {

// state, next_state: kTimestampRuleState values; rule: `width` values.
PARLEY_HOST_DEVICE inline void advance_timestamp_rule_one(int32_t chosen, const int32_t* state,
                                                          int32_t* next_state, int32_t* token,
                                                          int32_t* rule, int width,
                                                          TimestampRuleParams p) {
  // After `chosen` the last token is `chosen` and the penultimate the former last one.
  const int32_t on = state[0], penultimate = state[1];
  const bool chosen_ts = chosen >= p.timestamp_begin;
  const int32_t last_ts = chosen_ts ? chosen : state[2];
  next_state[0] = on;
  next_state[1] = chosen;
  next_state[2] = last_ts;
  *token = chosen;
  for (int j = 0; j < width; ++j) rule[j] = 0;
  if (!on) return;
  int n = 0;
  const auto add = [&](int32_t begin, int32_t end) {
    if (begin >= end) return;
    rule[1 + 2 * n] = begin;
    rule[2 + 2 * n] = end;
    ++n;
  };
  const bool penultimate_ts = penultimate < 0 || penultimate >= p.timestamp_begin;
  rule[0] = p.timestamp_begin;
  if (chosen_ts) add(penultimate_ts ? p.timestamp_begin : 0, penultimate_ts ? INT32_MAX : p.eot);
  if (last_ts >= 0) add(p.timestamp_begin, chosen_ts && !penultimate_ts ? last_ts : last_ts + 1);
}

}  // namespace parley::detail
