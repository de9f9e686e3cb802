#include "audio/resample.h"

#include <cmath>
#include <numeric>

#include "engine/error.h"

namespace parley {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kKaiserBeta = 8.6;  // ~ 80 dB stop band attenuation

double sinc(double x) { return x == 0.0 ? 1.0 : std::sin(kPi * x) / (kPi * x); }

double kaiser(double x) {  // x in [-1, 1]
  const double r = 1.0 - x * x;
  if (r <= 0.0) return 0.0;
  return std::cyl_bessel_i(0.0, kKaiserBeta * std::sqrt(r)) / std::cyl_bessel_i(0.0, kKaiserBeta);
}

}  // namespace

StreamResampler::StreamResampler(int in_rate, int out_rate, int half_width)
    : in_rate_(in_rate), out_rate_(out_rate), half_width_(half_width) {
  check_arg(in_rate > 0 && out_rate > 0 && half_width > 0,
            "[resample] rates and filter width must be positive");
  const int g = std::gcd(in_rate, out_rate);
  up_ = out_rate / g;
  down_ = in_rate / g;
  check_arg(up_ <= 1024, "[resample] " + std::to_string(in_rate) + " -> " +
                             std::to_string(out_rate) + " Hz needs too many filter phases");
  const double fc = 0.95 * std::min(1.0, double(up_) / double(down_));
  const int taps = 2 * half_width_;
  taps_.assign(size_t(up_) * size_t(taps), 0.0f);
  for (int p = 0; p < up_; ++p) {
    const double d = double(p) / up_;  // the output's offset past input n0
    double sum = 0.0;
    std::vector<double> row(static_cast<size_t>(taps));
    for (int j = -half_width_ + 1; j <= half_width_; ++j) {
      const double t = d - j;  // distance from input n0 + j to the output
      const double v = fc * sinc(fc * t) * kaiser(t / half_width_);
      row[size_t(j + half_width_ - 1)] = v;
      sum += v;
    }
    for (int k = 0; k < taps; ++k) taps_[size_t(p * taps + k)] = float(row[size_t(k)] / sum);
  }
}

void StreamResampler::reset() {
  history_.clear();
  history_start_ = 0;
  next_out_ = 0;
}

void StreamResampler::push(std::span<const float> in, std::vector<float>& out) {
  if (up_ == 1 && down_ == 1) {
    out.insert(out.end(), in.begin(), in.end());
    return;
  }
  history_.insert(history_.end(), in.begin(), in.end());
  const int64_t have = history_start_ + int64_t(history_.size());  // inputs [0, have) known
  const int taps = 2 * half_width_;
  while (true) {
    const int64_t pos = next_out_ * down_;  // the output's position, in 1 / L input samples
    const int64_t n0 = pos / up_;
    const int p = int(pos % up_);
    if (n0 + half_width_ >= have) break;  // needs inputs up to n0 + W
    const float* h = taps_.data() + size_t(p) * size_t(taps);
    double acc = 0.0;
    for (int k = 0; k < taps; ++k) {
      const int64_t i = n0 - half_width_ + 1 + k;
      if (i < history_start_) continue;  // before the stream: zero (or already dropped)
      acc += double(h[k]) * double(history_[size_t(i - history_start_)]);
    }
    out.push_back(float(acc));
    ++next_out_;
  }
  // Keep what the next output can still reach: inputs from its n0 - W + 1 on.
  const int64_t keep_from = (next_out_ * down_) / up_ - half_width_ + 1;
  if (keep_from > history_start_) {
    const int64_t drop = std::min<int64_t>(keep_from - history_start_, int64_t(history_.size()));
    history_.erase(history_.begin(), history_.begin() + drop);
    history_start_ += drop;
  }
}

}  // namespace parley
