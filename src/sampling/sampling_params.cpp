// Validation of SamplingParams; the ranges are OpenAI's where OpenAI documents one, vLLM's
// otherwise.
#include "sampling/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/error.h"

namespace parley {

namespace {

std::string fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void check_range(float v, double lo, double hi, bool lo_open, const char* name) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  check_arg(ok, std::string("[sampling] ") + name + " " + fmt(v) + " is outside " +
                    (lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) + "]");
}

void check_token(int32_t id, int32_t vocab_size, const char* name) {
  check_arg(id >= 0 && id < vocab_size, std::string("[sampling] ") + name + " token id " +
                                            std::to_string(id) + " is outside [0, " +
                                            std::to_string(vocab_size) + ")");
}

}  // namespace

void validate(const SamplingParams& p, int32_t vocab_size) {
  check_arg(vocab_size > 0, "[sampling] vocab_size must be positive");
  check_range(p.temperature, 0, 2, false, "temperature");
  check_range(p.top_p, 0, 1, true, "top_p");
  check_arg(p.top_k >= -1,
            "[sampling] top_k " + std::to_string(p.top_k) + " must be -1 or 0 (off) or at least 1");
  check_range(p.min_p, 0, 1, false, "min_p");
  check_range(p.presence_penalty, -2, 2, false, "presence_penalty");
  check_range(p.frequency_penalty, -2, 2, false, "frequency_penalty");
  check_arg(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0,
            "[sampling] repetition_penalty " + fmt(p.repetition_penalty) +
                " must be a finite number above 0");
  std::vector<int32_t> ids;
  ids.reserve(p.logit_bias.size());
  for (const auto& [id, bias] : p.logit_bias) {
    check_token(id, vocab_size, "logit_bias");
    check_range(bias, -100, 100, false, "logit_bias value");
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  check_arg(std::adjacent_find(ids.begin(), ids.end()) == ids.end(),
            "[sampling] logit_bias names a token id twice");
  check_arg(p.top_logprobs >= 0 && p.top_logprobs <= kMaxTopLogprobs,
            "[sampling] top_logprobs " + std::to_string(p.top_logprobs) + " is outside [0, " +
                std::to_string(kMaxTopLogprobs) + "]");
  check_arg(p.top_logprobs == 0 || p.logprobs, "[sampling] top_logprobs needs logprobs to be true");
  for (int32_t id : p.stop_token_ids) check_token(id, vocab_size, "stop_token_ids");
  check_arg(p.min_tokens >= 0,
            "[sampling] min_tokens " + std::to_string(p.min_tokens) + " must be at least 0");
  if (p.max_tokens) {
    check_arg(*p.max_tokens >= 1,
              "[sampling] max_tokens " + std::to_string(*p.max_tokens) + " must be at least 1");
    check_arg(p.min_tokens <= *p.max_tokens,
              "[sampling] min_tokens " + std::to_string(p.min_tokens) + " exceeds max_tokens " +
                  std::to_string(*p.max_tokens));
  }
  check_arg(p.stop.size() <= size_t(kMaxStopStrings),
            "[sampling] stop has " + std::to_string(p.stop.size()) + " strings; at most " +
                std::to_string(kMaxStopStrings) + " are allowed");
  for (const std::string& s : p.stop) check_arg(!s.empty(), "[sampling] stop has an empty string");
}

}  // namespace parley
