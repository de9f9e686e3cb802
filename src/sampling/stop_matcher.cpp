// StopMatcher: search the pending text for the stops, then keep back the longest tail that
// is a proper prefix of a stop or an unfinished UTF-8 character.
#include "sampling/stop_matcher.h"

#include <algorithm>
#include <string>

#include "engine/error.h"
#include "sampling/sampling_params.h"

namespace parley {

namespace {

// The bytes at the end of `s` that begin a UTF-8 character not yet complete (0-3).
size_t unfinished_utf8(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(n, 3); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  check_arg(stops_.size() <= size_t(kMaxStopStrings),
            "[stop] " + std::to_string(stops_.size()) + " stop strings; at most " +
                std::to_string(kMaxStopStrings) + " are allowed");
  for (const std::string& s : stops_) {
    check_arg(!s.empty(), "[stop] a stop string is empty");
    longest_ = std::max(longest_, s.size());
  }
}

size_t StopMatcher::max_held() const { return (longest_ > 0 ? longest_ - 1 : 0) + 3; }

size_t StopMatcher::held_suffix() const {
  const std::string_view text(pending_);
  size_t hold = 0;
  for (size_t k = std::min(text.size(), longest_ > 0 ? longest_ - 1 : 0); k > 0; --k) {
    const std::string_view tail = text.substr(text.size() - k);
    const bool prefix = std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) {
      return s.size() > k && std::string_view(s).substr(0, k) == tail;
    });
    if (prefix) {
      hold = k;
      break;
    }
  }
  return std::max(hold, unfinished_utf8(text));
}

StopMatcher::Step StopMatcher::push(std::string_view text) {
  Step step;
  if (stopped()) {
    step.stopped = true;
    return step;
  }
  pending_.append(text);
  size_t first = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = pending_.find(stops_[i]);
    if (at < first) {
      first = at;
      stop_index_ = int(i);
    }
  }
  if (first != std::string::npos) {
    step.emit = pending_.substr(0, first);
    step.stopped = true;
    pending_.clear();
    return step;
  }
  const size_t keep = held_suffix();
  step.emit = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return step;
}

std::string StopMatcher::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace parley
