// Internal to the CUDA backend: the ranking of token candidates and the partial results of a
// masked token choice, shared by masked_topk (reduce.cu) and the one-row GEMM that makes a
// greedy step's choice next to its logits (gemv.cu; matmul_masked_top1, ops/reduce.h).
//
// A choice over a row of V logits is split into segments (masked_topk's blocks, or the
// GEMM's blocks of output columns). Each segment writes its LseStats and the top k
// candidates of each side of the row's split point; the merge (masked_topk_merge_row in
// reduce.cu) turns the segments' maxima and sums into logsumexp, applies the split rule and
// takes the top k of the candidates. Layout per row, k candidates a side:
//   stats [segments], cand_v / cand_i [segments, 2 (head, tail), k];
// a k = 1 choice in the GEMM writes one Top1Partial a segment and has a merge of its own.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/cuda/common.cuh"

namespace parley {
struct TimestampRuleAdvance;
}

namespace parley::cuda {

struct Cand {
  float v;
  int32_t i;  // -1: no candidate (ranks after everything)
};

// One strict total order: NaN first (among NaNs, lower index first), then larger value, then
// lower index; i = -1 last.
__device__ __forceinline__ bool ranks_before(Cand a, Cand b) {
  if (a.i < 0) return false;
  if (b.i < 0) return true;
  const bool na = isnan(a.v), nb = isnan(b.v);
  if (na || nb) return na && (!nb || a.i < b.i);
  return a.v > b.v || (a.v == b.v && a.i < b.i);
}

__device__ __forceinline__ Cand first_of(Cand a, Cand b) { return ranks_before(b, a) ? b : a; }

// A rule row's split point P (ops/reduce.h: (P, b0, e0, ...)), clamped to [0, v].
__device__ __forceinline__ int32_t split_of(const int32_t* rule, int32_t v) {
  return rule[0] > 0 ? (rule[0] < v ? rule[0] : v) : 0;
}

// A segment's maxima before (head) and from (tail) the split point, and the sums of
// exp(x' - max) of its finite elements on each side (0 and max -inf where a side has none).
struct LseStats {
  float head_max, head_sum, tail_max, tail_sum;
};

// A segment of a k = 1 choice (the one-row GEMM's blocks): its LseStats and the index of
// each side's first candidate, whose value is that side's maximum (-1: the side is empty).
// 32 bytes, which the merge reads as two 16-byte loads.
struct alignas(16) Top1Partial {
  LseStats stats;
  int32_t head_i, tail_i;
  int32_t unused[2];
};

// The token choice made in the one-row GEMM (gemv with a choice, common.cuh): masked_topk's
// k = 1 of c's one f32 row [N] with `mask` (i8 [N], or null) and the rule row `rules`
// [width], writing `logprobs` and `indices` (one each) and, with `advance`, the timestamp
// rule's next input (ops/timestamp_rule.h).
struct GemvChoice {
  const int8_t* mask = nullptr;
  const int32_t* rules = nullptr;
  int width = 0;
  float* logprobs = nullptr;
  int32_t* indices = nullptr;
  const TimestampRuleAdvance* advance = nullptr;
};

// The merge of a one-row choice's `segments` partials (written by the kernel before it on
// stream(); a programmatic dependent of it while capturing): one block, then the advance
// when the choice has one.
void masked_top1_merge(int64_t segments, int32_t v, const GemvChoice& choice,
                       const Top1Partial* partials);

}  // namespace parley::cuda
