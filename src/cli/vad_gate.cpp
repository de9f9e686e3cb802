#include "cli/vad_gate.h"

#include <filesystem>

#include "cli/default_model.h"

namespace parley::cli {

std::string default_vad_model_path() {
  namespace fs = std::filesystem;
  return (fs::path(default_model_dir()).parent_path() / "silero-vad" / "silero_vad.onnx").string();
}

void add_vad_gate_options(CLI::App* cmd, VadGateOptions& o) {
  cmd->add_flag("--vad", o.enabled,
                "Run Silero VAD first: audio without speech gives an empty transcript and "
                "never reaches Whisper");
  cmd->add_flag("--vad-filter", o.filter,
                "With --vad: Whisper hears only the speech (silences of 2 s or more cut out, "
                "400 ms padding); times map back to the file");
  cmd->add_option("--vad-model", o.model,
                  "Silero VAD .onnx or .safetensors (default: " + default_vad_model_path() + ")");
  cmd->add_option("--vad-threshold", o.threshold, "Speech probability threshold")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

VadGate::VadGate(const VadGateOptions& o)
    : filter_(o.filter),
      model_(vad::SileroModel::load(o.model.empty() ? default_vad_model_path() : o.model)) {
  if (filter_) speech_ = vad::filter_speech_options();
  speech_.threshold = o.threshold;
}

std::vector<vad::SpeechSegment> VadGate::speech(std::span<const float> samples) const {
  return vad::speech_timestamps(*model_, samples, 16000, speech_);
}

}  // namespace parley::cli
