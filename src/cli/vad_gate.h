// The Silero VAD gate in front of Whisper, for the CLI commands: the --vad flags, where the
// VAD model lives by default, and the one question the gate asks (is there any speech?).
// Audio without speech never reaches Whisper: the caller skips loading and running it.
// With --vad-filter, Whisper hears only the speech (faster-whisper's vad_filter) and its
// segment times are mapped back to the file's timeline.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <span>
#include <string>

#include "vad/segments.h"
#include "vad/silero.h"
#include "vad/speech_map.h"
#include "whisper/segments.h"

namespace parley::cli {

// $PARLEY_HOME/models/silero-vad/silero_vad.onnx (next to the default Whisper model; the
// file of the silero-vad 6.2.1 wheel, installed by scripts/setup.sh).
std::string default_vad_model_path();

struct VadGateOptions {
  bool enabled = false;
  bool filter = false;  // transcribe only the speech (implies enabled)
  std::string model;    // empty: default_vad_model_path()
  double threshold = 0.5;
};

// --vad, --vad-filter, --vad-model, --vad-threshold on `cmd`.
void add_vad_gate_options(CLI::App* cmd, VadGateOptions& options);

class VadGate {
 public:
  explicit VadGate(const VadGateOptions& options);  // loads the model
  // The speech segments of 16 kHz mono `samples` (get_speech_timestamps' options, or
  // faster-whisper's vad_filter options with --vad-filter); empty: no speech.
  std::vector<vad::SpeechSegment> speech(std::span<const float> samples) const;
  bool filter() const { return filter_; }

 private:
  bool filter_;
  std::shared_ptr<const vad::SileroModel> model_;
  vad::SpeechOptions speech_;
};

}  // namespace parley::cli
