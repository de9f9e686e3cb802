// parley: command-line entry point. Errors thrown inside are translated here, once, into
// a message on stderr and an exit code per error kind.
#include <cstdio>
#include <exception>
#include <iostream>

#include "cli/commands.h"
#include "engine/error.h"

namespace {

int exit_code(parley::ErrorKind kind) {
  switch (kind) {
    case parley::ErrorKind::invalid_argument: return 2;
    case parley::ErrorKind::not_found: return 3;
    case parley::ErrorKind::unsupported: return 4;
    case parley::ErrorKind::resource_exhausted: return 5;
    case parley::ErrorKind::internal: return 1;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "parley: speech-to-text (Whisper) and chat inference, on NVIDIA GPUs and x86-64 CPUs"};
  app.set_version_flag("--version", std::string("parley ") + PARLEY_VERSION);
  app.require_subcommand(1);
  parley::cli::add_bench_command(app);
  parley::cli::add_inspect_command(app);
  parley::cli::add_transcribe_command(app);
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
