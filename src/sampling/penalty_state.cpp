// PenaltyState's counts and vLLM's penalty arithmetic.
#include "sampling/penalty_state.h"

#include <algorithm>
#include <string>

#include "engine/error.h"

namespace parley {

void PenaltyState::reset(int32_t vocab_size, std::span<const int32_t> prompt,
                         int64_t max_output_tokens) {
  check_arg(vocab_size > 0, "[sampling] vocab_size must be positive");
  output_count_.assign(size_t(vocab_size), 0);
  seen_.assign(size_t(vocab_size), 0);
  seen_list_.clear();
  output_length_ = 0;
  const int64_t bound =
      max_output_tokens > 0 ? int64_t(prompt.size()) + max_output_tokens : int64_t(vocab_size);
  seen_list_.reserve(size_t(std::min<int64_t>(bound, vocab_size)));
  for (int32_t id : prompt) {
    check_arg(id >= 0 && id < vocab_size, "[sampling] prompt token id " + std::to_string(id) +
                                              " is outside [0, " + std::to_string(vocab_size) +
                                              ")");
    if (!seen_[size_t(id)]) {
      seen_[size_t(id)] = 1;
      seen_list_.push_back(id);
    }
  }
}

void PenaltyState::accept(int32_t token) {
  ++output_count_[size_t(token)];
  ++output_length_;
  if (!seen_[size_t(token)]) {
    seen_[size_t(token)] = 1;
    seen_list_.push_back(token);
  }
}

void PenaltyState::apply(std::span<float> logits, float repetition, float frequency,
                         float presence) const {
  for (int32_t id : seen_list_) {
    float& l = logits[size_t(id)];
    if (repetition != 1.0f) l = l > 0.0f ? l / repetition : l * repetition;
    const int32_t count = output_count_[size_t(id)];
    if (count > 0) {
      l -= frequency * float(count);
      l -= presence;
    }
  }
}

}  // namespace parley
