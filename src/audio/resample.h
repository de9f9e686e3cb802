// Streaming sample-rate conversion by a rational factor (out / in reduced to L / M) for live
// audio that arrives in blocks of any size: the Realtime API's 24 kHz pcm16 and 8 kHz G.711
// to Whisper's 16 kHz. Files go through FFmpeg (decode.h) instead.
//
// A polyphase windowed-sinc filter: output sample k sits at input position t = k M / L and
// is sum_i x[i] g(t - i), g(t) = fc sinc(fc t) kaiser(t / W) over |t| < W input samples,
// fc = 0.95 min(1, L / M) of the input's Nyquist (so 7.6 kHz for 24 -> 16 kHz), each of the
// L phases normalized to unit DC gain. Zero phase: no delay, samples before the stream's
// start are zeros. W = 32 puts the transition band at ~6.7-8.5 kHz for 24 -> 16 kHz and
// ~3.5-4.1 kHz for 8 -> 16 kHz. An output needs W input samples after it, so a stream's last
// W / in_rate seconds (1.3 ms at 24 kHz) come out only with the input that follows. Equal
// rates copy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parley {

class StreamResampler {
 public:
  // Rates in Hz; half_width: W, the filter's reach in input samples on each side.
  StreamResampler(int in_rate, int out_rate, int half_width = 32);

  // Appends to `out` every output sample the input so far determines. Pushing a signal in
  // blocks of any sizes gives the same samples as pushing it at once.
  void push(std::span<const float> in, std::vector<float>& out);
  // Back to the start of a new stream.
  void reset();

  int in_rate() const { return in_rate_; }
  int out_rate() const { return out_rate_; }

 private:
  int in_rate_, out_rate_;
  int up_, down_;  // L, M
  int half_width_;
  std::vector<float> taps_;     // [L][2W]: phase p's tap for input n0 + j, j = -W+1 .. W
  std::vector<float> history_;  // input samples from history_start_ on
  int64_t history_start_ = 0;   // stream index of history_[0]
  int64_t next_out_ = 0;        // stream index of the next output sample
};

}  // namespace parley
