// CPU beam_step and copy_slot_rows (ops/beam_step.h): the shared parts (ops/beam_step_impl.h)
// in loops.
#include <cstring>
#include <vector>

#include "engine/ops/beam_step.h"
#include "engine/ops/beam_step_impl.h"

namespace parley::cpu {

void beam_step(const Tensor& ids, const Tensor& logprobs, const BeamStepIn& in, BeamStepOut& out,
               const BeamStepParams& params) {
  const detail::BeamStepPtrs a = detail::beam_step_pointers(ids, logprobs, in, out);
  const int nk = a.m * a.k;
  std::vector<float> scores(static_cast<size_t>(nk));
  std::vector<int32_t> order(static_cast<size_t>(nk)), source(static_cast<size_t>(a.n));
  for (int c = 0; c < nk; ++c) scores[size_t(c)] = detail::beam_score(a, c);
  for (int c = 0; c < nk; ++c) order[size_t(detail::beam_rank(scores.data(), nk, c))] = c;
  detail::beam_select(a, scores.data(), a.ids, order.data(), source.data(), params);
  for (int i = 0; i < a.n; ++i) detail::beam_advance_row(a, source.data(), i, params.grammar);
}

void copy_slot_rows(std::span<Tensor> caches, const Tensor& slots, const Tensor& copy_from,
                    const Tensor& first, int64_t end) {
  const int64_t n = slots.numel(), begin = first.data<int32_t>()[0];
  if (begin >= end) return;
  for (Tensor& c : caches) {
    const int64_t s = c.dim(0), t = c.dim(1);
    const size_t row = size_t(c.dim(2)) * dtype_size(c.dtype());
    auto* base = static_cast<char*>(c.raw());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t from = copy_from.data<int32_t>()[i], to = slots.data<int32_t>()[i];
      if (from < 0 || from >= s || to < 0 || to >= s || from == to || begin < 0) continue;
      std::memcpy(base + size_t(to * t + begin) * row, base + size_t(from * t + begin) * row,
                  size_t(end - begin) * row);
    }
  }
}

}  // namespace parley::cpu
