// The Silero VAD gate in front of Whisper, for the CLI commands: the --vad flags, where the
// VAD model lives by default, and the one question the gate asks (is there any speech?).
// Audio without speech never reaches Whisper: the caller skips loading and running it.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <span>
#include <string>

#include "vad/segments.h"
#include "vad/silero.h"

namespace parley::cli {

// $PARLEY_HOME/models/silero-vad/silero_vad.onnx (next to the default Whisper model; the
// file of the silero-vad 6.2.1 wheel, installed by scripts/setup.sh).
std::string default_vad_model_path();

struct VadGateOptions {
  bool enabled = false;
  std::string model;  // empty: default_vad_model_path()
  double threshold = 0.5;
};

// --vad, --vad-model, --vad-threshold on `cmd`.
void add_vad_gate_options(CLI::App* cmd, VadGateOptions& options);

class VadGate {
 public:
  explicit VadGate(const VadGateOptions& options);  // loads the model
  // Whether 16 kHz mono `samples` hold at least one speech segment.
  bool has_speech(std::span<const float> samples) const;

 private:
  std::shared_ptr<const vad::SileroModel> model_;
  vad::SpeechOptions speech_;
};

}  // namespace parley::cli
