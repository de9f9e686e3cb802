// The logit processors and row reductions of logit_processors.h.
#include "sampling/logit_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parley {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Larger logit first, then the lower id.
struct ByLogitDesc {
  const float* v;
  bool operator()(int32_t a, int32_t b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

}  // namespace

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [id, b] : bias) logits[size_t(id)] += b;
}

void ban_tokens(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids) logits[size_t(id)] = kNegInf;
}

void apply_temperature(std::span<float> logits, float temperature) {
  for (float& l : logits) l /= temperature;
}

void apply_min_p(std::span<float> logits, float min_p) {
  const int32_t top = argmax_logit(logits);
  if (top < 0) return;
  const double m = logits[size_t(top)];
  for (float& l : logits) {
    if (std::exp(double(l) - m) < double(min_p)) l = kNegInf;
  }
}

void apply_top_k_top_p(std::span<float> logits, int32_t top_k, float top_p,
                       std::span<int32_t> scratch) {
  const bool use_k = top_k > 0;
  const bool use_p = top_p < 1.0f;
  if (!use_k && !use_p) return;
  // The tokens still in the running: [0, n) of scratch.
  int32_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > kNegInf) scratch[size_t(n++)] = int32_t(i);
  }
  const ByLogitDesc cmp{logits.data()};
  int32_t* idx = scratch.data();
  if (use_k && top_k < n) {
    std::nth_element(idx, idx + top_k - 1, idx + n, cmp);
    const float kth = logits[size_t(idx[top_k - 1])];
    int32_t kept = 0;
    for (int32_t j = 0; j < n; ++j) {
      const int32_t id = idx[j];
      if (logits[size_t(id)] < kth) {
        logits[size_t(id)] = kNegInf;
      } else {
        idx[kept++] = id;
      }
    }
    n = kept;
  }
  if (!use_p || n <= 1) return;
  const double m = logits[size_t(*std::min_element(idx, idx + n, cmp))];
  double total = 0.0;
  for (int32_t j = 0; j < n; ++j) total += std::exp(double(logits[size_t(idx[j])]) - m);
  const double drop_mass = 1.0 - double(top_p);
  // Sorted in growing chunks: a nucleus is usually far smaller than the vocabulary.
  double above = 0.0;  // the weight of the tokens before position j
  int32_t j = 0;
  for (int32_t sorted = std::min(n, 256);; sorted = std::min(n, sorted * 4)) {
    std::partial_sort(idx + j, idx + sorted, idx + n, cmp);
    for (; j < sorted; ++j) {
      if (j > 0 && (total - above) / total <= drop_mass) {
        for (int32_t r = j; r < n; ++r) logits[size_t(idx[r])] = kNegInf;
        return;
      }
      above += std::exp(double(logits[size_t(idx[j])]) - m);
    }
    if (sorted == n) return;
  }
}

int32_t argmax_logit(std::span<const float> logits) {
  int32_t best = -1;
  float best_v = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_v) {
      best_v = logits[i];
      best = int32_t(i);
    }
  }
  return best;
}

double logsumexp_f64(std::span<const float> logits) {
  const int32_t top = argmax_logit(logits);
  if (top < 0) return -std::numeric_limits<double>::infinity();
  const double m = logits[size_t(top)];
  double s = 0.0;
  for (float l : logits) s += std::exp(double(l) - m);
  return m + std::log(s);
}

int32_t draw_token(std::span<const float> logits, double u) {
  const int32_t top = argmax_logit(logits);
  if (top < 0) return -1;
  const double m = logits[size_t(top)];
  double total = 0.0;
  for (float l : logits) total += std::exp(double(l) - m);
  const double target = u * total;
  double acc = 0.0;
  int32_t last = top;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(logits[i] > kNegInf)) continue;
    acc += std::exp(double(logits[i]) - m);
    last = int32_t(i);
    if (acc > target) return int32_t(i);
  }
  return last;  // u * total rounded up past the sum: the last candidate
}

int top_logprobs(std::span<const float> logits, double lse, int n, std::span<IdLogprob> out) {
  n = std::min({n, int(out.size()), int(logits.size())});
  if (n <= 0) return 0;
  // A sorted insertion list of at most n ids: O(vocab) when most tokens lose at once.
  int32_t best[64];
  const int cap = std::min(n, 64);
  int count = 0;
  const ByLogitDesc cmp{logits.data()};
  for (size_t i = 0; i < logits.size(); ++i) {
    const int32_t id = int32_t(i);
    if (count == cap && !cmp(id, best[cap - 1])) continue;
    int pos = count < cap ? count++ : cap - 1;
    while (pos > 0 && cmp(id, best[pos - 1])) {
      best[pos] = best[pos - 1];
      --pos;
    }
    best[pos] = id;
  }
  for (int j = 0; j < count; ++j) {
    out[size_t(j)] = {best[j], float(double(logits[size_t(best[j])]) - lse)};
  }
  return count;
}

int32_t logit_rank(std::span<const float> logits, int32_t token) {
  const float v = logits[size_t(token)];
  int32_t rank = 0;
  for (float l : logits) rank += l >= v ? 1 : 0;
  return rank;
}

}  // namespace parley
