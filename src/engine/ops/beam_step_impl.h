// Internal to the engine: beam_step's parts (ops/beam_step.h), written once for the CPU
// (cpu/beam_step.cpp) and the CUDA kernel (cuda/beam_step.cu), so the two cannot drift apart:
// a candidate's rank (one CUDA thread each), the walk over candidates best first (one thread)
// and each row's grammar step (one thread per row).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/ops/beam_step.h"
#include "engine/ops/timestamp_rule_impl.h"

namespace parley::detail {

struct BeamStepPtrs {
  const int32_t* ids;
  const float* logprobs;
  int m, k;  // candidate rows (ids [m, k]) and candidates per row
  int n;     // rows that go on
  const float* sums_in;
  const int32_t* slots_in;
  const int32_t* states_in;
  const int32_t* finished_in;
  int32_t* tokens;
  float* sums;
  int32_t* slots;
  int32_t* cache_rows;
  int32_t* copy_from;
  int32_t* states;
  int32_t* rules;
  int rule_width;
  int32_t* finished;
  int32_t* record;
};

// The raw pointers of beam_step's arguments (checked by the public op).
inline BeamStepPtrs beam_step_pointers(const Tensor& ids, const Tensor& logprobs,
                                       const BeamStepIn& in, BeamStepOut& out) {
  return {ids.data<int32_t>(),
          logprobs.data<float>(),
          int(ids.dim(0)),
          int(ids.dim(1)),
          int(out.tokens.numel()),
          in.sums.data<float>(),
          in.slots.data<int32_t>(),
          in.states.data<int32_t>(),
          in.finished.data<int32_t>(),
          out.tokens.data<int32_t>(),
          out.sums.data<float>(),
          out.slots.data<int32_t>(),
          out.cache_rows.data<int32_t>(),
          out.copy_from.data<int32_t>(),
          out.states.data<int32_t>(),
          out.rules.data<int32_t>(),
          int(out.rules.dim(1)),
          out.finished.data<int32_t>(),
          out.record.data<int32_t>()};
}

PARLEY_HOST_DEVICE inline float beam_score(const BeamStepPtrs& a, int c) {
  const float s = a.sums_in[c / a.k] + a.logprobs[c];
  return s != s ? -INFINITY : s;
}

// How many of the nk candidates (scores by candidate, c = row * k + j) go before candidate c:
// better scores, or equal ones earlier in row-major order.
PARLEY_HOST_DEVICE inline int beam_rank(const float* scores, int nk, int c) {
  const float s = scores[c];
  int rank = 0;
  for (int o = 0; o < nk; ++o) rank += scores[o] > s || (scores[o] == s && o < c);
  return rank;
}

PARLEY_HOST_DEVICE inline int32_t float_bits(float f) {
  int32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

// The walk over the candidates in `order` (order[rank] = candidate; their scores and ids by
// candidate): the rows that go on (source into `source`, n values), their tokens, sums,
// slots and copies, the finished ones and the record.
PARLEY_HOST_DEVICE inline void beam_select(const BeamStepPtrs& a, const float* scores,
                                           const int32_t* ids, const int32_t* order,
                                           int32_t* source, const BeamStepParams& p) {
  const int n = a.n;
  int32_t* rec = a.record;
  int32_t* rec_fin_source = rec + 3 * n + 2;
  int32_t* rec_fin_score = rec + 4 * n + 2;
  int finished = a.finished_in[0], fresh = 0, next = 0;
  for (int r = 0; r < a.m * a.k && next < n; ++r) {
    const int c = order[r];
    const float score = scores[c];
    if (ids[c] == p.grammar.eot) {
      if (finished < p.max_finished) {
        rec_fin_source[fresh] = c / a.k;
        rec_fin_score[fresh] = float_bits(score);
        ++fresh;
        ++finished;
      }
      continue;
    }
    source[next] = c / a.k;
    a.tokens[next] = ids[c];
    a.sums[next] = score;
    ++next;
  }
  // next < n only with fewer than n candidates that are not eot (K = 1, or N rows whose one
  // candidate is eot): the rest repeat the last row so the outputs stay defined; the host
  // reports that as an error (BeamSearch::update throws "ran out of candidates").
  for (int i = next; i < n; ++i) {
    source[i] = next > 0 ? source[next - 1] : 0;
    a.tokens[i] = next > 0 ? a.tokens[next - 1] : p.grammar.eot;
    a.sums[i] = -INFINITY;
  }
  // Slots: a row's first successor keeps its slot; later ones take free slots (copies).
  uint64_t taken = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t slot = a.slots_in[source[i]];
    const uint64_t bit = slot >= 0 && slot < 64 ? uint64_t(1) << slot : 0;  // 0: a bad slot
    if (bit && !(taken & bit)) {
      taken |= bit;
      a.slots[i] = slot;
      a.copy_from[i] = -1;
    } else {
      a.slots[i] = -1;
    }
  }
  int32_t free_slot = 0;
  for (int i = 0; i < n; ++i) {
    if (a.slots[i] >= 0) continue;
    while (taken & (uint64_t(1) << free_slot)) ++free_slot;
    taken |= uint64_t(1) << free_slot;
    a.slots[i] = free_slot;
    a.copy_from[i] = a.slots_in[source[i]];
  }
  for (int i = 0; i < n; ++i) {
    a.cache_rows[i] = a.slots[i] * p.slot_stride + p.next_position;
    rec[i] = source[i];
    rec[n + i] = a.tokens[i];
    rec[2 * n + i] = float_bits(a.sums[i]);
  }
  rec[3 * n] = fresh;
  rec[3 * n + 1] = finished >= p.max_finished ? 1 : 0;
  a.finished[0] = finished;
}

// Row i's grammar step from its source's state (after beam_select).
PARLEY_HOST_DEVICE inline void beam_advance_row(const BeamStepPtrs& a, const int32_t* source, int i,
                                                const TimestampRuleParams& g) {
  advance_timestamp_rule_one(a.tokens[i], a.states_in + source[i] * kTimestampRuleState,
                             a.states + i * kTimestampRuleState, a.tokens + i,
                             a.rules + i * a.rule_width, a.rule_width, g);
}

}  // namespace parley::detail
