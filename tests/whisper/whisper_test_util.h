// Shared pieces of the whisper tests: the test vocabularies as WhisperTokenizers, loaded
// once per test binary (the English-only gpt2.tiktoken of tiny.en, 51864 entries, and
// multilingual.tiktoken of tiny, 51865 entries), where the real tiny.en model lives, and
// jfk.wav's window.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/tensor.h"
#include "whisper/tokenizer.h"

namespace parley::whisper_test {

inline const WhisperTokenizer& english() {
  static const WhisperTokenizer tok = WhisperTokenizer::from_tiktoken(
      std::string(PARLEY_TEST_DATA) + "/whisper/gpt2.tiktoken", false, 51864);
  return tok;
}

inline const WhisperTokenizer& multilingual() {
  static const WhisperTokenizer tok = WhisperTokenizer::from_tiktoken(
      std::string(PARLEY_TEST_DATA) + "/whisper/multilingual.tiktoken", true, 51865);
  return tok;
}

// Why a test that reads mp3, aiff or 44.1 kHz audio skips in a build without FFmpeg (such as
// the GPU machine's; CI's build has it): `if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;`.
inline constexpr const char* kNeedsFfmpeg =
    "built without FFmpeg: the test reads mp3, aiff or 44.1 kHz audio";

// The real tiny.en (CTranslate2) that scripts/setup.sh installs; tests/CMakeLists.txt sets
// PARLEY_TEST_MODEL_DIR. Tests that need it skip when its model.bin is missing.
inline std::string model_dir() { return PARLEY_TEST_MODEL_DIR; }
inline bool have_tiny_en() { return std::filesystem::exists(model_dir() + "/model.bin"); }

// jfk.wav's one 30 s window as the encoder takes it: f32 [n_mels, 3000] log-mel on the CPU.
inline Tensor jfk_window(int n_mels = 80) {
  const std::vector<float> audio = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  return pad_or_trim_frames(log_mel_spectrogram(audio, n_mels, kChunkSamples), kChunkFrames);
}

}  // namespace parley::whisper_test
