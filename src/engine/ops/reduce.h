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
//
// matmul_masked_top1: a greedy decoder step's vocabulary product and its token choice in one
// op: logits f32 [1, V] = matmul(a [1, K], b, logits, opt) (matmul.h: b [V, K] with
// opt.trans_b, opt.norm may fold a LayerNorm in), then masked_topk(logits, mask, rules
// [1, 1 + 2R], 1, logprobs, indices, advance), with both ops' checks. On CUDA, where the
// one-row GEMM kernel takes the product (16-bit weights), its blocks are also the choice's
// segments: each ranks and sums the logits it computes under the mask and the rule row, and a
// one-block merge follows, so no masked_topk launch reads the logits back. The segments are
// smaller than masked_topk's, so the log-probability's sum of exponentials is added in
// another order (the last bits may differ); the choice and the logits are the same.
// PARLEY_FUSED_CHOICE=0 runs the two ops instead. Elsewhere the two ops run in turn.
#pragma once

#include "engine/ops/matmul.h"
#include "engine/ops/timestamp_rule.h"
#include "engine/tensor.h"

namespace parley {

constexpr int kMaskedTopKMax = 64;        // k
constexpr int kMaskedTopKMaxRanges = 16;  // R

void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);
void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices, const TimestampRuleAdvance* advance = nullptr);
void matmul_masked_top1(const Tensor& a, const Tensor& b, Tensor& logits, const MatmulOptions& opt,
                        const Tensor* mask, const Tensor& rules, Tensor& logprobs, Tensor& indices,
                        const TimestampRuleAdvance* advance = nullptr);

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
// matmul_masked_top1 in the one-row GEMM's launch and a merge (matmul.cu); false, launching
// nothing, where that kernel does not take the product.
bool matmul_masked_top1(const Tensor& a, const Tensor& b, Tensor& logits, const MatmulOptions& opt,
                        const Tensor* mask, const Tensor& rules, Tensor& logprobs, Tensor& indices,
                        const TimestampRuleAdvance* advance);
}  // namespace cuda

}  // namespace parley
