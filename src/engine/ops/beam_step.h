// beam_step: one step of beam search made where the token choices were made (masked_topk,
// ops/reduce.h), so that beam search's decoder steps can follow each other on the device with
// no host round trip, as greedy ones do with advance_timestamp_rule (ops/timestamp_rule.h).
// It is openai-whisper's BeamSearchDecoder.update for N rows that are all different
// sequences (every step after the first: the reference's candidates then never coincide) or
// all one (the first step), plus the bookkeeping of a KV cache kept in slots and the timestamp
// grammar's next rule rows.
//
// Inputs, M rows of K candidates for N rows (K <= kMaskedTopKMax, M * K <=
// kBeamStepMaxCandidates, 1 <= M <= N): M = N for a step; M = 1 for the first step, whose N
// rows are one sequence (the reference merges their equal candidates into one per token: the
// first row's);
//   ids i32 [M, K], logprobs f32 [M, K]: each row's top K, best first (masked_topk's order);
//   in.sums f32 [M]: each row's sum of log-probabilities so far;
//   in.slots i32 [M]: the cache slot each row's positions are in (values in [0, N));
//   in.states i32 [M, kTimestampRuleState]: each row's grammar state (timestamp_rule.h);
//   in.finished i32 [1]: how many sequences have finished so far.
// The step, as the reference's: candidate (r, j) scores in.sums[r] + logprobs[r, j] (f32; a
// NaN counts as -inf); candidates are taken best first (ties: r, then j, in order, as
// Python's stable sort of the reference's dict); one whose token is params.eot finishes
// (while fewer than params.max_finished have finished), the others continue until N have.
// Outputs (views that must not overlap the inputs: a replayed CUDA graph reads them twice):
//   out.tokens i32 [N]: row i's new token (the next step's input);
//   out.sums f32 [N]: its score;
//   out.slots i32 [N]: its slot: the first successor of a row keeps the row's slot, a later
//     one takes the lowest slot no first successor keeps, and copy_from[i] names the slot
//     whose positions it needs copied there (copy_slot_rows; -1: none);
//   out.cache_rows i32 [N]: out.slots * params.slot_stride + params.next_position (where the
//     next step writes each row's new position, scatter_rows);
//   out.states, out.rules i32 [N, W]: advance_timestamp_rule of the row's source state and
//     new token (W odd, 5 <= W <= 1 + 2 * kMaskedTopKMaxRanges);
//   out.finished i32 [1];
//   record i32 [beam_record_width(N)] (may be pinned host memory the device writes): what
//     the host needs to follow the search, laid out as
//       [source N | tokens N | sums N (f32 bits) | newly finished F | completed |
//        finished source N | finished score N (f32 bits)]
//     where source[i] is the row (< M) that row i continues, the first F entries of the
//     finished columns are the sequences that finished at this step, best first (the row
//     they extend with params.eot, and their score), and completed is 1 once max_finished
//     have finished.
#pragma once

#include <cstdint>
#include <span>

#include "engine/ops/timestamp_rule.h"
#include "engine/tensor.h"

namespace parley {

constexpr int kBeamStepMaxCandidates = 1024;  // N * K: one CUDA block ranks them
constexpr int kBeamStepMaxRows = 63;          // N: slots are bits of a 64-bit mask

struct BeamStepParams {
  int32_t max_finished = 1;  // the reference's max_candidates: round(beam_size * patience)
  int32_t slot_stride = 0;   // cache_rows = slot * slot_stride + next_position
  int32_t next_position = 0;
  TimestampRuleParams grammar;  // eot: the token that finishes a sequence
};

constexpr int64_t beam_record_width(int64_t n) { return 5 * n + 2; }

struct BeamStepIn {
  Tensor sums, slots, states, finished;
};
struct BeamStepOut {
  Tensor tokens, sums, slots, cache_rows, copy_from, states, rules, finished, record;
};

void beam_step(const Tensor& ids, const Tensor& logprobs, const BeamStepIn& in, BeamStepOut& out,
               const BeamStepParams& params);

// The copies beam_step asks for, in every cache of `caches` (each [S, T, D], the same shape
// and dtype, slots by positions by width): for each row i with copy_from[i] >= 0, positions
// [first, end) of slot copy_from[i] go to slot slots[i]. first: i32 [1] in device memory
// (so a captured graph serves every start), 0 <= first; end <= T. Slot indices outside
// [0, S) are skipped.
void copy_slot_rows(std::span<Tensor> caches, const Tensor& slots, const Tensor& copy_from,
                    const Tensor& first, int64_t end);

namespace cpu {
void beam_step(const Tensor& ids, const Tensor& logprobs, const BeamStepIn& in, BeamStepOut& out,
               const BeamStepParams& params);
void copy_slot_rows(std::span<Tensor> caches, const Tensor& slots, const Tensor& copy_from,
                    const Tensor& first, int64_t end);
}  // namespace cpu
namespace cuda {
void beam_step(const Tensor& ids, const Tensor& logprobs, const BeamStepIn& in, BeamStepOut& out,
               const BeamStepParams& params);
void copy_slot_rows(std::span<Tensor> caches, const Tensor& slots, const Tensor& copy_from,
                    const Tensor& first, int64_t end);
}  // namespace cuda

}  // namespace parley
