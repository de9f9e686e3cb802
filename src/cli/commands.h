// The parley subcommands. main.cpp builds the CLI11 app; each subcommand lives in its own
// file and registers itself here: add_*_command(app) declares flags and the callback.
#pragma once

#include <CLI/CLI.hpp>

namespace parley::cli {

void add_bench_command(CLI::App& app);
void add_dictate_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_transcribe_command(CLI::App& app);
void add_vad_command(CLI::App& app);
void add_whisper_command(CLI::App& app);
// `bench whisper`, added by add_bench_command under its `bench` subcommand.
void add_bench_whisper_subcommand(CLI::App& bench);
// `bench batch` (bench_batch.cpp), likewise.
void add_bench_batch_subcommand(CLI::App& bench);
// `synth llm` (synth_llm.cpp) under `synth`, and `llm dump` (llm_dump.cpp).
void add_synth_llm_subcommand(CLI::App& synth);
void add_llm_command(CLI::App& app);
// `grammar gbnf / check / masks` (grammar.cpp).
void add_grammar_command(CLI::App& app);
// `bench llm` (bench_llm.cpp), under `bench`.
void add_bench_llm_subcommand(CLI::App& bench);
// `bench spec` (bench_spec.cpp), under `bench`.
void add_bench_spec_subcommand(CLI::App& bench);
// `generate` and `chat` (generate.cpp).
void add_generate_commands(CLI::App& app);

}  // namespace parley::cli
