#include "grammar/constraint.h"

#include <algorithm>
#include <limits>

#include "engine/error.h"

namespace parley {

RegexConstraint::RegexConstraint(std::shared_ptr<Regex> re,
                                 std::shared_ptr<const std::vector<std::string>> token_bytes,
                                 std::vector<int32_t> stop_tokens)
    : re_(std::move(re)),
      bytes_(std::move(token_bytes)),
      stops_(std::move(stop_tokens)),
      state_(re_->start()) {}

const std::vector<uint8_t>& RegexConstraint::allowed(int32_t state) {
  auto it = masks_.find(state);
  if (it != masks_.end()) return it->second;
  std::vector<uint8_t> m(bytes_->size(), 0);
  for (size_t id = 0; id < bytes_->size(); ++id) {
    const std::string& b = (*bytes_)[id];
    if (!b.empty() && re_->step(state, b) != Regex::kDead) m[id] = 1;
  }
  return masks_.emplace(state, std::move(m)).first->second;
}

void RegexConstraint::mask(std::span<float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::vector<uint8_t>& m = allowed(state_);
  const bool done = re_->accepting(state_);
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool stop = std::binary_search(stops_.begin(), stops_.end(), int32_t(id));
    const bool ok = stop ? done : id < m.size() && m[id];
    if (!ok) logits[id] = kNegInf;
    any = any || ok;
  }
  check_arg(
      any, "[grammar] no token can continue the answer under the pattern '" + re_->pattern() + "'");
}

void RegexConstraint::accept(int32_t token) {
  if (std::binary_search(stops_.begin(), stops_.end(), token)) return;
  if (token >= 0 && size_t(token) < bytes_->size())
    state_ = re_->step(state_, (*bytes_)[size_t(token)]);
}

bool RegexConstraint::complete() { return re_->accepting(state_); }

}  // namespace parley
