// `parley synth whisper --shape tiny --seed 0 -o DIR --vocab multilingual.tiktoken`: a
// synthetic Hugging Face layout Whisper model at a real shape (see whisper/synth.h), for
// tests and benchmarks where no real weights can be had.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "whisper/synth.h"

namespace parley::cli {
namespace {

struct SynthCliOptions {
  std::string shape = "tiny";
  uint64_t seed = 0;
  std::string output_dir;
  std::string vocab;
  std::string dtype = "f32";
  bool dry_run = false;  // print the config and tensor list, write nothing
};

void run_synth_whisper(const SynthCliOptions& o) {
  const WhisperConfig config = synth_config(o.shape);
  if (o.dry_run) {
    // Every synth shape uses the multilingual vocabulary: 50257 ranks, eot = 50257.
    std::cout << synth_config_json(config, 50257);
    int64_t params = 0;
    for (const auto& s : synth_tensor_specs(config)) {
      std::cout << s.name << " " << s.shape.str() << "\n";
      params += s.shape.numel();
    }
    std::cout << "parameters: " << params << "\n";
    return;
  }
  SynthOptions so;
  so.shape = o.shape;
  so.seed = o.seed;
  so.vocab_path = o.vocab;
  so.dtype = o.dtype == "f16" ? DType::f16 : o.dtype == "bf16" ? DType::bf16 : DType::f32;
  const auto start = std::chrono::steady_clock::now();
  write_synth_whisper(so, o.output_dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "wrote synthetic whisper " << o.shape << " (seed " << o.seed << ", " << o.dtype
            << ") to " << o.output_dir << " in " << seconds << " s\n";
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto* synth = app.add_subcommand("synth", "Write synthetic models (real shapes, seeded weights)");
  synth->require_subcommand(1);
  auto opt = std::make_shared<SynthCliOptions>();
  auto* w = synth->add_subcommand("whisper", "A Hugging Face layout Whisper model directory");
  w->add_option("--shape", opt->shape, "Model shape")
      ->check(CLI::IsMember(synth_shape_names()))
      ->capture_default_str();
  w->add_option("--seed", opt->seed, "Generator seed (same seed: identical files)")
      ->capture_default_str();
  w->add_option("-o,--output-dir", opt->output_dir, "Directory to write");
  w->add_option("--vocab", opt->vocab,
                "tiktoken ranks file of the vocabulary (multilingual.tiktoken; required)");
  w->add_option("--dtype", opt->dtype, "Weight dtype in model.safetensors")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  w->add_flag("--dry-run", opt->dry_run, "Print config.json and the tensor shapes only");
  w->callback([opt] {
    if (!opt->dry_run && opt->output_dir.empty()) throw CLI::RequiredError("--output-dir");
    run_synth_whisper(*opt);
  });
}

}  // namespace parley::cli
