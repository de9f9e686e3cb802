// Reference: openai/whisper whisper/decoding.py (GreedyDecoder.update at T > 0,
// MaximumLikelihoodRanker). The random numbers are parley's own (see sampling.h).
#include "whisper/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/error.h"

namespace parley {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double uniform_draw(uint64_t seed, uint64_t stream, uint64_t row, uint64_t step) {
  const uint64_t h = splitmix64(seed ^ splitmix64(stream ^ splitmix64(row ^ splitmix64(step))));
  return double(h >> 11) * 0x1.0p-53;
}

double logsumexp(std::span<const float> row) {
  float m = -std::numeric_limits<float>::infinity();
  for (float x : row) m = std::max(m, x);
  if (std::isinf(m)) return double(m);
  double sum = 0;
  for (float x : row) sum += std::exp(double(x) - double(m));
  return double(m) + std::log(sum);
}

int32_t argmax(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

int32_t sample_token(std::span<const float> logits, float temperature, double u) {
  check_arg(temperature > 0.0f, "[whisper] sampling needs a temperature > 0");
  float m = -std::numeric_limits<float>::infinity();
  for (float x : logits) m = std::max(m, x / temperature);
  check(!std::isinf(m), ErrorKind::internal, "[whisper] every token is suppressed");
  double total = 0;
  for (float x : logits) total += std::exp(double(x / temperature) - double(m));
  const double target = u * total;
  double cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == -std::numeric_limits<float>::infinity()) continue;
    cum += std::exp(double(logits[i] / temperature) - double(m));
    last = int32_t(i);
    if (cum > target) return last;
  }
  return last;  // u * total rounded past the last cumulative sum
}

size_t rank_candidates(std::span<const size_t> lengths, std::span<const float> sum_logprobs,
                       std::optional<float> length_penalty) {
  check_arg(!lengths.empty() && lengths.size() == sum_logprobs.size(),
            "[whisper] rank_candidates: empty or mismatched candidate lists");
  size_t best = 0;
  double best_score = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const double length = double(lengths[i]);
    // A candidate of length 0 (only possible without suppress_blank) makes the reference
    // raise ZeroDivisionError without a length_penalty; here it ranks last.
    const double penalty =
        length_penalty ? std::pow((5.0 + length) / 6.0, double(*length_penalty)) : length;
    const double score =
        penalty == 0 ? -std::numeric_limits<double>::infinity() : double(sum_logprobs[i]) / penalty;
    if (i == 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

}  // namespace parley
