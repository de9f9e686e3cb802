// parley: command-line entry point. Errors thrown inside are translated here, once, into
// a message on stderr and an exit code per error kind.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>

#include "cli/commands.h"
#include "engine/error.h"
#include "engine/ops/matmul.h"

namespace {

int exit_code(parley::ErrorKind kind) {
  switch (kind) {
    case parley::ErrorKind::invalid_argument: return 2;
    case parley::ErrorKind::not_found: return 3;
    case parley::ErrorKind::unsupported: return 4;
    case parley::ErrorKind::resource_exhausted: return 5;
    case parley::ErrorKind::cancelled: return 130;
    case parley::ErrorKind::internal: return 1;
  }
  return 1;
}

// Debian's oneDNN runs GEMMs on OpenMP threads, which by default spin after each parallel
// region and then take the cores from parley's own thread pool: decoding measured 4-10x
// slower on a 2-core machine (bench/RESULTS.md). libgomp reads OMP_WAIT_POLICY once, when
// it is loaded (before main), so the process re-executes itself once with it set. A value
// the user set is kept.
void ensure_passive_openmp(char** argv) {
  if (std::strcmp(parley::cpu::gemm_provider(), "onednn") != 0) return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_openmp(argv);
  CLI::App app{
      "parley: speech-to-text (Whisper) and chat inference, on NVIDIA GPUs and x86-64 CPUs"};
  app.set_version_flag("--version", std::string("parley ") + PARLEY_VERSION);
  app.require_subcommand(1);
  parley::cli::add_bench_command(app);
  parley::cli::add_dictate_command(app);
  parley::cli::add_grammar_command(app);
  parley::cli::add_inspect_command(app);
  parley::cli::add_serve_command(app);
  parley::cli::add_synth_command(app);
  parley::cli::add_synth_llm_subcommand(*app.get_subcommand("synth"));
  parley::cli::add_llm_command(app);
  parley::cli::add_generate_commands(app);
  parley::cli::add_transcribe_command(app);
  parley::cli::add_vad_command(app);
  parley::cli::add_whisper_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const parley::Error& e) {
    std::cerr << "parley: error: " << e.what() << "\n";
    return exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "parley: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
