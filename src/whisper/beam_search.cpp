// Reference: openai/whisper whisper/decoding.py, BeamSearchDecoder (update, finalize).
#include "whisper/beam_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/error.h"

namespace parley {

BeamSearch::BeamSearch(int beam_size, int32_t eot, std::optional<float> patience)
    : beam_size_(beam_size), eot_(eot) {
  check_arg(beam_size > 0, "[whisper] beam_size must be > 0, got " + std::to_string(beam_size));
  // `patience or 1.0`: a patience of 0 also means 1.0 in the reference.
  const double p = patience && *patience != 0.0f ? double(*patience) : 1.0;
  // Python's round(): half to even.
  max_candidates_ = int(std::nearbyint(double(beam_size) * p));
  check_arg(max_candidates_ > 0, "[whisper] invalid beam_size (" + std::to_string(beam_size) +
                                     ") or patience: round(beam_size * patience) must be > 0");
}

BeamSearch::Step BeamSearch::update(std::vector<std::vector<int32_t>>& rows,
                                    std::span<const std::vector<float>> logprobs,
                                    std::vector<float>& sum_logprobs) {
  const size_t n = size_t(beam_size_);
  check_arg(logprobs.size() == n,
            "[whisper] beam search: expected " + std::to_string(n) + " rows of log-probabilities");
  // topk(beam_size + 1) of each row: one pass keeping the best k, larger first, lower id on
  // ties.
  const size_t k = std::min(logprobs[0].size(), n + 1);
  top_ids_.clear();
  top_logprobs_.clear();
  std::vector<int32_t>& top = top_;
  for (size_t j = 0; j < n; ++j) {
    const std::vector<float>& lp = logprobs[j];
    check_arg(lp.size() >= k, "[whisper] beam search: rows of different lengths");
    top.clear();
    for (size_t i = 0; i < lp.size(); ++i) {
      if (top.size() == k && !(lp[i] > lp[size_t(top.back())])) continue;
      if (top.size() == k) top.pop_back();
      auto at = top.end();
      while (at != top.begin() && lp[i] > lp[size_t(*(at - 1))]) --at;
      top.insert(at, int32_t(i));
    }
    for (int32_t t : top) {
      top_ids_.push_back(t);
      top_logprobs_.push_back(lp[size_t(t)]);
    }
  }
  return update(rows, top_ids_, top_logprobs_, int(k), sum_logprobs);
}

BeamSearch::Step BeamSearch::update(std::vector<std::vector<int32_t>>& rows,
                                    std::span<const int32_t> top_ids,
                                    std::span<const float> top_logprobs, int k_given,
                                    std::vector<float>& sum_logprobs) {
  const size_t n = size_t(beam_size_);
  check_arg(rows.size() == n && sum_logprobs.size() == n,
            "[whisper] beam search: expected " + std::to_string(n) + " rows");
  const size_t stride = size_t(k_given);
  check_arg(top_ids.size() == n * stride && top_logprobs.size() == n * stride,
            "[whisper] beam search: expected " + std::to_string(n) + " rows of " +
                std::to_string(k_given) + " candidates");
  // The reference takes topk(beam_size + 1) of each row (fewer only with a tinier vocabulary).
  const size_t k = std::min(stride, n + 1);
  // STEP 1: candidates in the reference's dict order (beam by beam, each beam's top-k best
  // first). Equal sequences (all beams are equal at the first step) are one entry: its
  // place is the first insertion, its score and source the last.
  struct Candidate {
    size_t source;
    int32_t token;
    float score;
  };
  std::vector<Candidate> cands;
  for (size_t j = 0; j < n; ++j) {
    for (size_t t = 0; t < k; ++t) {
      const int32_t token = top_ids[j * stride + t];
      const float score = sum_logprobs[j] + top_logprobs[j * stride + t];  // f32, as the tensor sum
      auto same = std::find_if(cands.begin(), cands.end(), [&](const Candidate& c) {
        return c.token == token && rows[c.source] == rows[j];
      });
      if (same != cands.end()) {
        same->score = score;
        same->source = j;
      } else {
        cands.push_back({j, token, score});
      }
    }
  }

  // STEP 2: best first (a stable sort, as Python's sorted(reverse=True)); the first
  // beam_size unfinished go on, finished ones met before that join the finished list.
  std::vector<size_t> order(cands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cands[a].score > cands[b].score; });
  std::vector<std::vector<int32_t>> next;
  Step step;
  std::vector<float> next_sums;
  std::vector<BeamCandidate> newly_finished;
  for (size_t idx : order) {
    const Candidate& c = cands[idx];
    std::vector<int32_t> seq = rows[c.source];
    seq.push_back(c.token);
    if (c.token == eot_) {
      newly_finished.push_back({std::move(seq), c.score});
    } else {
      next.push_back(std::move(seq));
      next_sums.push_back(c.score);
      step.source.push_back(int32_t(c.source));
      if (next.size() == n) break;
    }
  }
  check(next.size() == n, ErrorKind::internal, "[whisper] beam search ran out of candidates");
  rows = std::move(next);
  sum_logprobs = std::move(next_sums);

  for (auto& f : newly_finished) {  // already best first
    if (int(finished_.size()) >= max_candidates_) break;
    finished_.push_back(std::move(f));
  }
  step.completed = int(finished_.size()) >= max_candidates_;
  return step;
}

BeamSearch::Step BeamSearch::apply(std::vector<std::vector<int32_t>>& rows,
                                   const BeamStepRecord& record, std::vector<float>& sum_logprobs) {
  const size_t n = size_t(beam_size_);
  check(rows.size() == n && record.source.size() == n && record.tokens.size() == n &&
            record.sums.size() == n,
        ErrorKind::internal, "[whisper] beam search: a device step of another beam size");
  for (const int32_t s : record.source)
    check(s >= 0 && size_t(s) < n, ErrorKind::internal,
          "[whisper] beam search: a device step's source " + std::to_string(s) + " is no row");
  for (const BeamStepRecord::Finished& f : record.finished) {
    check(f.row >= 0 && size_t(f.row) < n && int(finished_.size()) < max_candidates_,
          ErrorKind::internal, "[whisper] beam search: a device step finished a row it could not");
    std::vector<int32_t> seq = rows[size_t(f.row)];
    seq.push_back(eot_);
    finished_.push_back({std::move(seq), f.score});
  }
  std::vector<std::vector<int32_t>> next(n);
  for (size_t i = 0; i < n; ++i) {
    next[i].reserve(rows[size_t(record.source[i])].size() + 1);
    next[i] = rows[size_t(record.source[i])];
    next[i].push_back(record.tokens[i]);
  }
  rows = std::move(next);
  sum_logprobs = record.sums;
  Step step;
  step.source = record.source;
  step.completed = int(finished_.size()) >= max_candidates_;
  check(step.completed == record.completed, ErrorKind::internal,
        "[whisper] beam search: the device's finished count differs from the host's");
  return step;
}

std::vector<BeamCandidate> BeamSearch::finalize(const std::vector<std::vector<int32_t>>& rows,
                                                std::span<const float> sum_logprobs) const {
  std::vector<BeamCandidate> out = finished_;
  if (int(out.size()) < beam_size_) {
    // list(np.argsort(sum_logprobs))[::-1]: best first; among equal scores the later row
    // first (np.argsort sorts these few values stably).
    std::vector<size_t> order(rows.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sum_logprobs[a] < sum_logprobs[b]; });
    std::reverse(order.begin(), order.end());
    for (size_t j : order) {
      std::vector<int32_t> seq = rows[j];
      seq.push_back(eot_);
      out.push_back({std::move(seq), sum_logprobs[j]});
      if (int(out.size()) >= beam_size_) break;
    }
  }
  return out;
}

}  // namespace parley
