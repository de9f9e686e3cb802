// open_microphone() through PortAudio (capture.h): the default input device opened as a
// blocking 16 kHz mono f32 stream, read 20 ms at a time. The stream runs from the start,
// so pressing the talk key loses nothing while the device spins up.
#include <fcntl.h>
#include <portaudio.h>
#include <unistd.h>

#include "dictate/capture.h"
#include "engine/error.h"

namespace parley::dictate {
namespace {

void check_pa(PaError e, const std::string& what) {
  check(e == paNoError, ErrorKind::internal,
        "[dictate] microphone: " + what + ": " + Pa_GetErrorText(e));
}

// stderr sent to /dev/null while this lives: ALSA and JACK print dozens of lines while
// PortAudio probes host APIs that this machine lacks (no JACK server, no card 0), which
// would bury the one message that matters.
class QuietStderr {
 public:
  QuietStderr() : saved_(::dup(2)) {
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, 2);
      ::close(null);
    }
  }
  ~QuietStderr() {
    if (saved_ >= 0) {
      ::dup2(saved_, 2);
      ::close(saved_);
    }
  }
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_;
};

class Microphone : public CaptureSource {
 public:
  Microphone() {
    PaError init = paNoError;
    {
      QuietStderr quiet;
      init = Pa_Initialize();
    }
    check_pa(init, "Pa_Initialize");
    const PaDeviceIndex dev = Pa_GetDefaultInputDevice();
    if (dev == paNoDevice) {
      Pa_Terminate();
      throw Error(ErrorKind::not_found,
                  "[dictate] microphone: no input device (use --input FILE to transcribe a file)");
    }
    const PaDeviceInfo* info = Pa_GetDeviceInfo(dev);
    name_ = std::string("microphone (") + (info && info->name ? info->name : "default") + ")";
    PaStreamParameters in{};
    in.device = dev;
    in.channelCount = 1;
    in.sampleFormat = paFloat32;
    in.suggestedLatency = info ? info->defaultLowInputLatency : 0.05;
    PaError e = paNoError;
    {
      QuietStderr quiet;
      e = Pa_OpenStream(&stream_, &in, nullptr, kSampleRate, kChunkSamples, paNoFlag, nullptr,
                        nullptr);
    }
    if (e == paNoError) {
      const PaError s = Pa_StartStream(stream_);
      if (s == paNoError) return;
      Pa_CloseStream(stream_);
      Pa_Terminate();
      check_pa(s, "starting the stream");
    }
    Pa_Terminate();
    check_pa(e, "opening " + name_ + " at 16 kHz mono");
  }
  ~Microphone() override {
    Pa_StopStream(stream_);
    Pa_CloseStream(stream_);
    Pa_Terminate();
  }
  Microphone(const Microphone&) = delete;
  Microphone& operator=(const Microphone&) = delete;

  bool read(std::vector<float>& out) override {
    const size_t at = out.size();
    out.resize(at + kChunkSamples);
    const PaError e = Pa_ReadStream(stream_, out.data() + at, kChunkSamples);
    // An overflow (the loop was busy transcribing) drops old input, not this chunk.
    if (e != paNoError && e != paInputOverflowed) check_pa(e, "reading");
    return true;
  }
  std::string name() const override { return name_; }

 private:
  PaStream* stream_ = nullptr;
  std::string name_;
};

}  // namespace

bool built_with_portaudio() { return true; }

std::unique_ptr<CaptureSource> open_microphone() { return std::make_unique<Microphone>(); }

}  // namespace parley::dictate
