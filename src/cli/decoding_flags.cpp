// Reference: openai-whisper's cli() (whisper/transcribe.py) for the names, defaults and the
// temperature ladder.
#include "cli/decoding_flags.h"

#include <cmath>
#include <optional>
#include <vector>

#include "engine/error.h"

namespace parley::cli {
namespace {

// A number, or nullopt for "none" / "" (the reference CLI's optional_float).
std::optional<float> optional_float(const std::string& name, const std::string& text) {
  if (text.empty() || text == "none" || text == "None") return std::nullopt;
  size_t used = 0;
  float v = 0;
  try {
    v = std::stof(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check_arg(used == text.size() && std::isfinite(v),
            "[transcribe] --" + name + ": expected a number or 'none', got '" + text + "'");
  return v;
}

// --temperature T --temperature-increment-on-fallback INC: T, T + INC, ... up to 1.0
// (np.arange(T, 1.0 + 1e-6, INC) in the reference), or just T when INC is none.
std::vector<float> temperature_ladder(float start, const std::string& increment) {
  const std::optional<float> inc = optional_float("temperature-increment-on-fallback", increment);
  check_arg(start >= 0.0f, "[transcribe] --temperature must be >= 0");
  if (!inc) return {start};
  check_arg(*inc > 0.0f, "[transcribe] --temperature-increment-on-fallback must be > 0 or none");
  std::vector<float> out;
  const double stop = 1.0 + 1e-6;
  const auto n = int64_t(std::ceil((stop - double(start)) / double(*inc)));
  for (int64_t i = 0; i < n; ++i) out.push_back(float(double(start) + double(i) * double(*inc)));
  if (out.empty()) out.push_back(start);  // a start above 1.0: that one temperature
  return out;
}

}  // namespace

void add_decoding_flags(CLI::App* cmd, DecodingFlags& f) {
  cmd->add_option("--temperature", f.temperature, "First sampling temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--temperature-increment-on-fallback", f.temperature_increment,
                  "Temperature step of the fallback, up to 1.0 ('none': no fallback)")
      ->capture_default_str();
  cmd->add_option("--best-of", f.best_of,
                  "Candidates sampled at a temperature > 0 (0: one, the API default)");
  cmd->add_option("--beam-size", f.beam_size,
                  "Beams of a beam search at temperature 0 (0: greedy)");
  cmd->add_option("--patience", f.patience, "Beam search patience (default 1.0)");
  cmd->add_option("--length-penalty", f.length_penalty,
                  "Ranking length penalty alpha in [0, 1] (default: divide by the length)");
  cmd->add_option("--seed", f.seed, "Seed of the sampling at temperatures > 0")
      ->capture_default_str();
  cmd->add_option("--compression-ratio-threshold", f.compression_ratio_threshold,
                  "Retry above this gzip compression ratio ('none': never)")
      ->capture_default_str();
  cmd->add_option("--logprob-threshold", f.logprob_threshold,
                  "Retry below this average log-probability ('none': never)")
      ->capture_default_str();
  cmd->add_option("--no-speech-threshold", f.no_speech_threshold,
                  "Skip a window as silence above this no-speech probability ('none': never)")
      ->capture_default_str();
  cmd->add_option("--condition-on-previous-text", f.condition_on_previous_text,
                  "Give the previous text as the prompt (true/false)")
      ->capture_default_str();
  cmd->add_option("--initial-prompt", f.initial_prompt, "Text before the first window's prompt");
  cmd->add_option("--carry-initial-prompt", f.carry_initial_prompt,
                  "Put the initial prompt before every window's prompt (true/false)")
      ->capture_default_str();
  cmd->add_option("--prefix", f.prefix, "Text every window's transcript starts with");
  cmd->add_option("--hotwords", f.hotwords,
                  "Vocabulary hints given to every window, e.g. \"ComfyUI, Kubernetes\"");
  cmd->add_option("--suppress-tokens", f.suppress_tokens,
                  "Comma-separated token ids never sampled; -1: the non-speech symbols")
      ->capture_default_str();
  cmd->add_option("--suppress-blank", f.suppress_blank,
                  "Suppress a blank or <|endoftext|> first token (true/false)")
      ->capture_default_str();
  cmd->add_option("--max-initial-timestamp", f.max_initial_timestamp,
                  "Latest first timestamp in seconds (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--sample-len", f.sample_len, "Most tokens per window (0: 224)");
  cmd->add_option("--clip-timestamps", f.clip_timestamps,
                  "start,end,start,end,... seconds to transcribe (the last end: the audio's)")
      ->capture_default_str();
}

void apply_decoding_flags(const DecodingFlags& f, TranscribeOptions& o) {
  o.temperatures = temperature_ladder(f.temperature, f.temperature_increment);
  o.best_of = f.best_of;
  o.beam_size = f.beam_size;
  o.patience = optional_float("patience", f.patience);
  o.length_penalty = optional_float("length-penalty", f.length_penalty);
  o.seed = f.seed;
  o.compression_ratio_threshold =
      optional_float("compression-ratio-threshold", f.compression_ratio_threshold);
  o.logprob_threshold = optional_float("logprob-threshold", f.logprob_threshold);
  o.no_speech_threshold = optional_float("no-speech-threshold", f.no_speech_threshold);
  o.condition_on_previous_text = f.condition_on_previous_text;
  if (!f.initial_prompt.empty()) o.initial_prompt = f.initial_prompt;
  o.carry_initial_prompt = f.carry_initial_prompt;
  if (!f.prefix.empty()) o.prefix = f.prefix;
  if (!f.hotwords.empty()) o.hotwords = f.hotwords;
  o.suppress_tokens = f.suppress_tokens;
  o.suppress_blank = f.suppress_blank;
  o.max_initial_timestamp = f.max_initial_timestamp;
  o.sample_len = f.sample_len;
  o.clip_timestamps = parse_clip_timestamps(f.clip_timestamps);
}

}  // namespace parley::cli
