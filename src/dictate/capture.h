// Audio sources for `parley dictate`: 16 kHz mono float chunks as they are captured. The
// microphone (PortAudio, optional at build time) and a file streamed at real-time speed
// (`--input FILE`, `--speed X`) share this interface, so everything after the capture
// (push-to-talk, VAD trimming, transcription, output) runs the same path for both.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace parley::dictate {

constexpr int kSampleRate = 16000;  // Hz, what Whisper and Silero take
constexpr int kChunkSamples = 320;  // 20 ms per read

class CaptureSource {
 public:
  virtual ~CaptureSource() = default;
  // Blocks until the next chunk (kChunkSamples, fewer at a file's end) and appends it to
  // `out`; false once the source has ended (a file's last sample was delivered).
  virtual bool read(std::vector<float>& out) = 0;
  // What the source is, for messages: "microphone (<device>)" or the file's path.
  virtual std::string name() const = 0;
};

// `path` decoded at once (any format load_audio reads), then delivered chunk by chunk at
// `speed` times real time: chunk k is handed out no earlier than k * 20 ms / speed after
// the first read. Error(invalid_argument) for speed <= 0.
std::unique_ptr<CaptureSource> open_file_source(const std::string& path, double speed);

// The default input device through PortAudio, 16 kHz mono f32. Without PortAudio in the
// build: Error(unsupported) "built without PortAudio; use --input FILE".
std::unique_ptr<CaptureSource> open_microphone();
bool built_with_portaudio();

}  // namespace parley::dictate
