// get_speech_timestamps and VADIterator, ported rule by rule from silero-vad 6.2.1
// (src/silero_vad/utils_vad.py). Sample positions are integers and the derived limits
// doubles, as in the Python (sr * ms / 1000 is a float there), so comparisons and the
// int() truncations of the padding step come out the same.
#include "vad/segments.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace parley::vad {
namespace {

// Python's // on integers (floors toward negative infinity).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

struct Current {  // the Python dict current_speech: empty, or a start (and an end)
  std::optional<int64_t> start;
};

}  // namespace

std::vector<SpeechSegment> speech_segments_from_probs(std::span<const float> probs,
                                                      int64_t n_samples, int sample_rate,
                                                      const SpeechOptions& o) {
  const int64_t window = chunk_samples(sample_rate);
  const double sr = sample_rate;
  const double min_speech_samples = sr * o.min_speech_duration_ms / 1000;
  const double speech_pad_samples = sr * o.speech_pad_ms / 1000;
  const double max_speech_samples =
      sr * o.max_speech_duration_s - double(window) - 2 * speech_pad_samples;
  const double min_silence_samples = sr * o.min_silence_duration_ms / 1000;
  const double min_silence_at_max = sr * o.min_silence_at_max_speech_ms / 1000;
  const double threshold = o.threshold;
  const double neg_threshold =
      o.neg_threshold ? *o.neg_threshold : std::max(threshold - 0.15, 0.01);

  bool triggered = false;
  std::vector<SpeechSegment> speeches;
  Current current;
  int64_t temp_end = 0;
  int64_t prev_end = 0, next_start = 0;
  std::vector<std::pair<int64_t, int64_t>> possible_ends;  // (temp_end, silence length)

  auto push = [&](int64_t end) { speeches.push_back({*current.start, end}); };

  for (size_t i = 0; i < probs.size(); ++i) {
    const double p = probs[i];
    const int64_t cur = window * int64_t(i);

    // Speech returns after a temp_end: remember the silence if long enough.
    if (p >= threshold && temp_end != 0) {
      const int64_t sil = cur - temp_end;
      if (double(sil) > min_silence_at_max) possible_ends.emplace_back(temp_end, sil);
      temp_end = 0;
      if (next_start < prev_end) next_start = cur;
    }
    // Start of speech.
    if (p >= threshold && !triggered) {
      triggered = true;
      current.start = cur;
      continue;
    }
    // Maximum speech length reached: decide where to cut.
    if (triggered && double(cur - *current.start) > max_speech_samples) {
      if (o.use_max_poss_sil_at_max_speech && !possible_ends.empty()) {
        // The longest silence; max() keeps the first of equals.
        auto best = possible_ends.front();
        for (const auto& e : possible_ends) {
          if (e.second > best.second) best = e;
        }
        prev_end = best.first;
        push(prev_end);
        current = {};
        next_start = prev_end + best.second;
        if (next_start < prev_end + cur) {
          current.start = next_start;
        } else {
          triggered = false;
        }
        prev_end = next_start = temp_end = 0;
        possible_ends.clear();
      } else if (prev_end != 0) {
        push(prev_end);
        current = {};
        if (next_start < prev_end) {
          triggered = false;
        } else {
          current.start = next_start;
        }
        prev_end = next_start = temp_end = 0;
        possible_ends.clear();
      } else {
        push(cur);
        current = {};
        prev_end = next_start = temp_end = 0;
        triggered = false;
        possible_ends.clear();
        continue;
      }
    }
    // Silence while in speech.
    if (p < neg_threshold && triggered) {
      if (temp_end == 0) temp_end = cur;
      const int64_t sil_now = cur - temp_end;
      if (!o.use_max_poss_sil_at_max_speech && double(sil_now) > min_silence_at_max) {
        prev_end = temp_end;
      }
      if (double(sil_now) < min_silence_samples) continue;
      // The reference reads current_speech['start'] here; it is always set while triggered.
      if (double(temp_end - *current.start) > min_speech_samples) push(temp_end);
      current = {};
      prev_end = next_start = temp_end = 0;
      triggered = false;
      possible_ends.clear();
    }
  }
  if (current.start && double(n_samples - *current.start) > min_speech_samples) push(n_samples);

  // Padding: pad_ms on each side, split evenly where two segments are closer than 2 pads.
  for (size_t i = 0; i < speeches.size(); ++i) {
    SpeechSegment& s = speeches[i];
    if (i == 0) s.start = int64_t(std::max(0.0, double(s.start) - speech_pad_samples));
    if (i + 1 != speeches.size()) {
      SpeechSegment& next = speeches[i + 1];
      const int64_t silence = next.start - s.end;
      if (double(silence) < 2 * speech_pad_samples) {
        s.end += floor_div(silence, 2);
        next.start = std::max<int64_t>(0, next.start - floor_div(silence, 2));
      } else {
        s.end = int64_t(std::min(double(n_samples), double(s.end) + speech_pad_samples));
        next.start = int64_t(std::max(0.0, double(next.start) - speech_pad_samples));
      }
    } else {
      s.end = int64_t(std::min(double(n_samples), double(s.end) + speech_pad_samples));
    }
  }
  return speeches;
}

std::vector<SpeechSegment> speech_timestamps(const SileroModel& model,
                                             std::span<const float> samples, int sample_rate,
                                             const SpeechOptions& options) {
  const std::vector<float> probs = model.probabilities(samples, sample_rate);
  return speech_segments_from_probs(probs, int64_t(samples.size()), sample_rate, options);
}

bool has_speech(const SileroModel& model, std::span<const float> samples, int sample_rate,
                const SpeechOptions& options) {
  return !speech_timestamps(model, samples, sample_rate, options).empty();
}

VadIterator::VadIterator(std::shared_ptr<const SileroModel> model, int sample_rate,
                         const SpeechOptions& options)
    : model_(std::move(model)), sample_rate_(sample_rate), options_(options) {
  check_arg(model_ != nullptr, "[vad] VadIterator needs a model");
  state_ = model_->new_state(sample_rate_);
  pending_.reserve(size_t(chunk_samples(sample_rate_)));
}

void VadIterator::reset() {
  state_.reset();
  pending_.clear();
  probs_.clear();
  triggered_ = false;
  temp_end_ = 0;
  current_sample_ = 0;
}

std::vector<VadEvent> VadIterator::push(std::span<const float> samples) {
  const size_t n = size_t(chunk_samples(sample_rate_));
  std::vector<VadEvent> events;
  size_t used = 0;
  while (used < samples.size()) {
    const size_t take = std::min(n - pending_.size(), samples.size() - used);
    pending_.insert(pending_.end(), samples.begin() + long(used),
                    samples.begin() + long(used + take));
    used += take;
    if (pending_.size() < n) break;
    float prob = 0.0f;
    model_->forward(state_, pending_, std::span<float>(&prob, 1));
    pending_.clear();
    probs_.push_back(prob);
    if (auto e = step(prob)) events.push_back(*e);
  }
  return events;
}

// VADIterator.__call__ for one chunk of `window` samples.
std::optional<VadEvent> VadIterator::step(float prob) {
  const int64_t window = chunk_samples(sample_rate_);
  const double sr = sample_rate_;
  const double min_silence_samples = sr * options_.min_silence_duration_ms / 1000;
  const double speech_pad_samples = sr * options_.speech_pad_ms / 1000;
  const double threshold = options_.threshold;
  current_sample_ += window;

  if (prob >= threshold && temp_end_ != 0) temp_end_ = 0;
  if (prob >= threshold && !triggered_) {
    triggered_ = true;
    const double start =
        std::max(0.0, double(current_sample_) - speech_pad_samples - double(window));
    return VadEvent{VadEvent::Kind::start, int64_t(start)};
  }
  if (prob < threshold - 0.15 && triggered_) {
    if (temp_end_ == 0) temp_end_ = current_sample_;
    if (double(current_sample_ - temp_end_) < min_silence_samples) return std::nullopt;
    const double end = double(temp_end_) + speech_pad_samples - double(window);
    temp_end_ = 0;
    triggered_ = false;
    return VadEvent{VadEvent::Kind::end, int64_t(end)};
  }
  return std::nullopt;
}

}  // namespace parley::vad
