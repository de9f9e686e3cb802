// `parley synth llm --shape qwen3-0.6b --out DIR [--seed N] [--layers N] [--dtype bf16]
// [--mtp deepseek_v3|mimo]`: a
// synthetic Hugging Face chat-model directory at a real shape or a tiny test shape (see
// llm/synth.h), for tests and benchmarks where no real weights can be had.
#include <chrono>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "llm/synth.h"

namespace parley::cli {

void add_synth_llm_subcommand(CLI::App& synth) {
  struct Options {
    std::string shape = "tiny-qwen3";
    uint64_t seed = 0;
    int64_t layers = 0;
    std::string dtype = "f32";
    std::string out;
    std::string mtp;
    bool dry_run = false;
  };
  auto opt = std::make_shared<Options>();
  auto* s = synth.add_subcommand("llm", "A Hugging Face layout chat-model directory");
  s->add_option("--shape", opt->shape, "Model shape")
      ->check(CLI::IsMember(llm_synth_shape_names()))
      ->capture_default_str();
  s->add_option("--seed", opt->seed, "Generator seed (same seed: identical files)")
      ->capture_default_str();
  s->add_option("--layers", opt->layers, "Decoder layers (0: the shape's own count)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--dtype", opt->dtype, "Weight dtype in model.safetensors")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  s->add_option("-o,--out", opt->out, "Directory to write");
  s->add_option("--mtp", opt->mtp,
                "Add a multi-token-prediction module in DeepSeek-V3's or XiaomiMiMo's layout "
                "(llm/mtp.h)")
      ->check(CLI::IsMember({"deepseek_v3", "mimo"}));
  s->add_flag("--dry-run", opt->dry_run, "Print config.json only");
  s->callback([opt] {
    if (opt->dry_run) {
      std::cout << llm_synth_config_json(opt->shape, opt->layers);
      return;
    }
    if (opt->out.empty()) throw CLI::RequiredError("--out");
    LlmSynthOptions so;
    so.shape = opt->shape;
    so.seed = opt->seed;
    so.layers = opt->layers;
    so.dtype = opt->dtype == "bf16" ? DType::bf16 : DType::f32;
    so.mtp = opt->mtp;
    const auto start = std::chrono::steady_clock::now();
    write_synth_llm(so, opt->out);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "wrote synthetic " << opt->shape << " (seed " << opt->seed << ", " << opt->dtype
              << ") to " << opt->out << " in " << seconds << " s\n";
  });
}

}  // namespace parley::cli
