// advance_timestamp_rule: the next input of a greedy decoder step whose token choice is
// masked_topk (ops/reduce.h) under Whisper's timestamp grammar, computed where the choice was
// made, so that decoder steps can follow each other on the device with no host round trip.
// The grammar is openai-whisper's ApplyTimestampRules past the first sampled token (the
// whisper layer's ApplyTimestampRules::add_rule writes the same rows on the host); it needs
// only a few tokens of the sampled history, kept as a state row per sequence.
//
// Per sequence r of N:
//   chosen i32 [N] or [N, 1]: the token just chosen (masked_topk's indices, k = 1).
//   state i32 [N, kTimestampRuleState], read: (on, last, last_timestamp) of the tokens
//     sampled before `chosen`: on != 0: the grammar applies (else the rule rows are all
//     zeros); last and last_timestamp are token ids, or -1 for none. (The grammar looks at
//     the last two tokens: after this step they are `chosen` and `last`.)
//   next_state (same shape), written: the state after `chosen`:
//     (on, chosen, chosen >= timestamp_begin ? chosen : last_timestamp).
//   tokens i32 [N], written: chosen (the next step's input token).
//   rules i32 [N, W] (W odd, 5 <= W <= 1 + 2 * kMaskedTopKMaxRanges), written: masked_topk's
//     rule row of the position after `chosen`: with on == 0 all zeros; else split
//     timestamp_begin and, in this order, the ranges
//       - when `chosen` is a timestamp: [timestamp_begin, INT32_MAX) when `last` is a
//         timestamp or none (a pair closed: text next), else [0, eot) (an open timestamp:
//         its closing one or <|endoftext|>);
//       - when a timestamp t was sampled (the latest, chosen included): [timestamp_begin, t)
//         right after an open timestamp, else [timestamp_begin, t + 1) (timestamps never
//         decrease, and a closed segment is never empty);
//     a range with begin >= end left out, unused pairs (0, 0).
// next_state, tokens and rules may be views of one buffer, but none may overlap chosen or
// state: a replayed step (a CUDA graph) must read the same inputs twice.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/tensor.h"

namespace parley {

constexpr int kTimestampRuleState = 3;  // state columns

struct TimestampRuleParams {
  int32_t eot = 0;              // <|endoftext|>
  int32_t timestamp_begin = 0;  // the first timestamp token (<|0.00|>)
};

void advance_timestamp_rule(const Tensor& chosen, const Tensor& state, Tensor& next_state,
                            Tensor& tokens, Tensor& rules, const TimestampRuleParams& params);

// advance_timestamp_rule's outputs and inputs other than `chosen`, for an op that makes the
// choice and advances in the same launch (masked_topk, ops/reduce.h).
struct TimestampRuleAdvance {
  const Tensor* state = nullptr;
  Tensor* next_state = nullptr;
  Tensor* tokens = nullptr;
  Tensor* rules = nullptr;
  TimestampRuleParams params;
};

namespace detail {
// advance_timestamp_rule's argument checks, errors under `op`; returns the device.
Device check_timestamp_rule(std::string_view op, const Tensor& chosen, const Tensor& state,
                            const Tensor& next_state, const Tensor& tokens, const Tensor& rules,
                            const TimestampRuleParams& params);
}  // namespace detail

namespace cpu {
void advance_timestamp_rule(const Tensor& chosen, const Tensor& state, Tensor& next_state,
                            Tensor& tokens, Tensor& rules, const TimestampRuleParams& params);
}
namespace cuda {
void advance_timestamp_rule(const Tensor& chosen, const Tensor& state, Tensor& next_state,
                            Tensor& tokens, Tensor& rules, const TimestampRuleParams& params);
}

}  // namespace parley
