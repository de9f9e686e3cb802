// Selection over the last dimension of x [N, V] (float dtypes):
//   argmax: out i32 [N], the first index of the maximum (ties: lowest index, as PyTorch).
//   topk:   values [N, k] (x's dtype) and indices i32 [N, k], sorted by value descending,
//           ties broken by the lower index. 1 <= k <= V.
// NaN is treated as larger than every number (PyTorch's argmax convention).
//
// masked_topk: a decoder's token choice next to its logits. x f32 [N, V]; per row, x' is x
// with -inf at every i where mask[i] != 0 (mask i8 [V], shared by the rows; nullptr: none)
// and inside every range [b, e) of the row's rules; then, when the row's split point P > 0
// and logsumexp(x'[P:]) > max(x'[:P]), x'[:P] = -inf too (Whisper's rule that timestamps,
// together likelier than any text token, must be chosen). rules i32 [N, 1 + 2R]:
// (P, b0, e0, b1, e1, ...); P <= 0: no split; a pair with b >= e is unused; ranges are
// clamped to [0, V). Out: indices i32 [N, k], the first k of x' in the order (larger value,
// lower index) — argmax for k = 1 — and logprobs f32 [N, k], x'[i] - logsumexp(x') there
// (log_softmax). 1 <= k <= min(V, 64). The CPU takes logsumexp in f64 (as Whisper's host
// filters); CUDA in f32, so its log-probabilities may differ in the last bits.
// advance (optional, k = 1): then advance_timestamp_rule (ops/timestamp_rule.h) of each row's
// chosen index, with advance's state, next_state, tokens and rules, as if called after
// masked_topk with chosen = indices (on CUDA in the same launch: a greedy decoder step's
// choice and its next input with no kernel between). Its outputs may not overlap x, mask,
// rules, logprobs, indices or its state.
#pragma once

#include "engine/ops/timestamp_rule.h"
#include "engine/tensor.h"

namespace parley {

constexpr int kMaskedTopKMax = 64;        // k
constexpr int kMaskedTopKMaxRanges = 16;  // R

void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);
void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices, const TimestampRuleAdvance* advance = nullptr);

namespace cpu {
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);
void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices);
}  // namespace cpu
namespace cuda {
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);
void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices, const TimestampRuleAdvance* advance);
}  // namespace cuda

}  // namespace parley
