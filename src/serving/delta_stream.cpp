#include "serving/delta_stream.h"

#include <utility>

namespace parley {

DeltaStream::DeltaStream(const WhisperTokenizer& tokenizer,
                         std::function<void(const std::string&)> emit,
                         std::optional<float> no_speech_threshold,
                         std::optional<float> logprob_threshold)
    : tok_(tokenizer),
      emit_(std::move(emit)),
      no_speech_threshold_(no_speech_threshold),
      logprob_threshold_(logprob_threshold) {}

void DeltaStream::on_no_speech_prob(float p) {
  reset_window();  // every attempt starts a window's tokens afresh
  // The seek loop's silence rule: no_speech_prob > threshold and a low avg_logprob.
  hold_ = no_speech_threshold_ && logprob_threshold_ && p > *no_speech_threshold_;
}

void DeltaStream::on_token(int32_t id) {
  if (window_done_) reset_window();
  if (id == tok_.eot()) {
    window_done_ = true;
    return;
  }
  window_.push_back(id);
  const int32_t tb = tok_.timestamp_begin();
  const size_t n = window_.size();
  if (!hold_ && id >= tb && n >= 2 && window_[n - 2] >= tb) release(tok_.decode(window_));
}

void DeltaStream::on_segment(const Segment& s) {
  window_done_ = true;  // segments come after their window's last token
  kept_ += tok_.decode(s.tokens);
  release(kept_);
}

void DeltaStream::finish() {
  const std::string rest = streamer_.flush();
  if (!rest.empty()) emit_(rest);
}

void DeltaStream::release(const std::string& text) {
  if (text.size() <= sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return;
  const std::string piece = streamer_.push(text.substr(sent_.size()));
  sent_ = text;
  if (!piece.empty()) emit_(piece);
}

void DeltaStream::reset_window() {
  window_.clear();
  sent_.clear();
  kept_.clear();
  window_done_ = false;
  hold_ = false;
}

}  // namespace parley
