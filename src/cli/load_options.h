// The --device / --dtype flags shared by `transcribe`, `bench whisper` and the chat-model
// commands (generate, chat, llm dump, bench llm, serve): where the model
// runs and the dtype of its weights and activations (f32 on the CPU is the parity path).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/error.h"
#include "llm/model.h"
#include "whisper/model.h"

namespace parley::cli {

struct DeviceFlags {
  std::string device = "cpu";  // cpu | cuda
  std::string dtype = "f32";   // f32 | f16 | bf16 | int8 (Whisper on the CPU)
  bool int8_encoder = false;   // --int8-encoder (Whisper, with --dtype int8)
};

inline void add_device_flags(CLI::App* cmd, DeviceFlags& f) {
  cmd->add_option("--device", f.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", f.dtype,
                  "Weights and activations: f32, f16 or bf16; int8: Whisper on the CPU with "
                  "q8_0 decoder weights")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "int8"}))
      ->capture_default_str();
}

inline LoadOptions load_options(const DeviceFlags& f) {
  LoadOptions o;
  o.device = f.device == "cuda" ? Device::cuda : Device::cpu;
  o.dtype = f.dtype == "f16" ? DType::f16 : (f.dtype == "bf16" ? DType::bf16 : DType::f32);
  o.int8 = f.dtype == "int8";
  check(!o.int8 || o.device == Device::cpu, ErrorKind::unsupported,
        "[cli] --dtype int8 is a CPU configuration of Whisper; on CUDA use f16 or bf16");
  return o;
}

// The Whisper commands' own load flags (transcribe, bench whisper, serve, dictate):
// --audio-ctx N (LoadOptions::audio_ctx, whisper.cpp's option of the same name) and
// --int8-encoder (LoadOptions::int8_encoder).
inline void add_whisper_load_flags(CLI::App* cmd, DeviceFlags& f, int& audio_ctx) {
  cmd->add_option("--audio-ctx", audio_ctx,
                  "Encoder positions per window (0: all 1500 = 30 s; N: the first N * 20 ms of "
                  "audio only, a faster encoder for short live speech)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--int8-encoder", f.int8_encoder,
                "With --dtype int8: the encoder's linear layers in 8-bit integers too (faster, "
                "but outside the int8 configuration's fidelity bar on hard clips: "
                "docs/DECODING.md)");
}

inline LoadOptions load_options(const DeviceFlags& f, int audio_ctx) {
  LoadOptions o = load_options(f);
  o.audio_ctx = audio_ctx;
  o.int8_encoder = f.int8_encoder;
  check(!o.int8_encoder || o.int8, ErrorKind::invalid_argument,
        "[cli] --int8-encoder needs --dtype int8");
  return o;
}

// The same flags for a chat model (llm/model.h): the CPU runs f32 only.
inline LlmLoadOptions llm_load_options(const DeviceFlags& f) {
  const LoadOptions o = load_options(f);
  check(!o.int8, ErrorKind::unsupported,
        "[cli] --dtype int8 is for Whisper models; a chat model's 8-bit weights come from a "
        "Q8_0 GGUF file");
  return LlmLoadOptions{o.device, o.dtype};
}

}  // namespace parley::cli
