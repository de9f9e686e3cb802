// The file source of `parley dictate --input FILE` (capture.h).
#include "dictate/capture.h"

#include <algorithm>
#include <thread>

#include "audio/decode.h"
#include "engine/error.h"

namespace parley::dictate {
namespace {

class FileSource : public CaptureSource {
 public:
  FileSource(std::string path, double speed)
      : path_(std::move(path)), speed_(speed), samples_(load_audio(path_, kSampleRate)) {}

  bool read(std::vector<float>& out) override {
    if (pos_ >= samples_.size()) return false;
    using Clock = std::chrono::steady_clock;
    if (pos_ == 0) start_ = Clock::now();
    // Real time: this chunk is "captured" once its first sample's time has passed.
    const double at_s = double(pos_) / kSampleRate / speed_;
    std::this_thread::sleep_until(
        start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at_s)));
    const size_t n = std::min<size_t>(kChunkSamples, samples_.size() - pos_);
    out.insert(out.end(), samples_.begin() + long(pos_), samples_.begin() + long(pos_ + n));
    pos_ += n;
    return true;
  }
  std::string name() const override { return path_; }

 private:
  std::string path_;
  double speed_;
  std::vector<float> samples_;
  size_t pos_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::unique_ptr<CaptureSource> open_file_source(const std::string& path, double speed) {
  check_arg(speed > 0, "[dictate] --speed must be positive, got " + std::to_string(speed));
  return std::make_unique<FileSource>(path, speed);
}

}  // namespace parley::dictate
