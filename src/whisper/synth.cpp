// Synthetic Whisper model directories: shapes, deterministic weights, config.json and the
// Hugging Face tokenizer files derived from tiktoken ranks.
#include "whisper/synth.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <unordered_map>

#include "engine/error.h"
#include "text/hf_tokenizer.h"
#include "text/tiktoken.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct NamedShape {
  const char* name;
  int d, heads, enc_layers, dec_layers, n_mels, n_vocab;
};

// WHISPER.md "Model": d_model, heads, encoder layers, decoder layers, mels, vocabulary.
constexpr NamedShape kShapes[] = {
    {"tiny", 384, 6, 4, 4, 80, 51865},          {"base", 512, 8, 6, 6, 80, 51865},
    {"small", 768, 12, 12, 12, 80, 51865},      {"medium", 1024, 16, 24, 24, 80, 51865},
    {"large-v3", 1280, 20, 32, 32, 128, 51866}, {"large-v3-turbo", 1280, 20, 32, 4, 128, 51866},
};

// ---- generator ----

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

// xoshiro256** (Blackman & Vigna), seeded by splitmix64 as its authors recommend.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto& word : s_) word = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Standard deviation of the sum of four uniform 16-bit integers: 65536 / sqrt(3).
constexpr double kIrwinHallStd = 37837.22636;

// n values ~ N(mean, std), approximately: Irwin-Hall with four 16-bit uniforms per value
// (bounded at +-3.46 std), centred exactly in integers, so the only rounding is one float
// multiply (or one fma when mean != 0): identical on every IEEE machine, unlike log/cos.
void fill_normal(std::span<float> out, uint64_t stream_seed, double mean, double std) {
  Xoshiro256 rng(stream_seed);
  const float scale = float(std / kIrwinHallStd);
  const float m = float(mean);
  for (float& v : out) {
    const uint64_t r = rng.next();
    const int64_t sum = int64_t(r & 0xffff) + int64_t((r >> 16) & 0xffff) +
                        int64_t((r >> 32) & 0xffff) + int64_t(r >> 48) - 2 * 65535;
    v = m == 0.0f ? float(sum) * scale : std::fma(float(sum), scale, m);
  }
}

// whisper/model.py sinusoids(length, channels): [sin | cos] of position * 10000^(-i/(c/2-1)).
// Computed in double and rounded once to float.
void fill_sinusoids(std::span<float> out, int64_t length, int64_t channels) {
  const int64_t half = channels / 2;
  const double increment = std::log(10000.0) / double(half - 1);
  for (int64_t p = 0; p < length; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double t = double(p) * std::exp(-increment * double(i));
      out[size_t(p * channels + i)] = float(std::sin(t));
      out[size_t(p * channels + half + i)] = float(std::cos(t));
    }
}

// ---- weight scales ----

// Trained-model-like defaults.
constexpr double kMatrixStd = 0.02;
constexpr double kBiasStd = 0.01;
constexpr double kGammaStd = 0.05;  // LayerNorm weight ~ N(1, 0.05)
constexpr double kBetaStd = 0.02;
constexpr double kDecoderPositionStd = 0.01;
// Decoder self-attention out-proj and fc2 are shrunk so that they do not pull the
// residual stream towards the input token's embedding (which, tied to the output, makes a
// random decoder repeat its input token).
constexpr double kDecoderSelfScale = 0.5;
// Cross-attention: q and k have elements of std kCrossQkGain after projection (std =
// gain / sqrt(d)), so the scaled q.k logits have std kCrossQkGain^2 = 16 and each query
// attends to a few frames; v and out-proj keep unit scale, so the attended audio dominates
// the residual stream (token embeddings are 0.02) and the next token depends on where the
// previous token's query looked. Measured on jfk.wav (--language en --no-timestamps,
// greedy, 224 tokens), distinct tokens / most repeats: gain 0.4 (plain N(0, 0.02)) one
// token forever; gain 2: 58 / 47 (tiny); gain 4: tiny 181 / 6 (seeds 1, 2: 151, 194),
// base 194 / 6, small 192 / 7.
constexpr double kCrossQkGain = 4.0;
constexpr double kCrossVoGain = 1.0;
// The decoder's final LayerNorm gamma ~ N(16, 0.05): tied logits with 0.02 embeddings
// have std ~0.4 at gamma 1, so every token is nearly equally likely (avg_logprob ~ -9,
// top-1 margins ~0.1). At 16, jfk.wav decodes with avg_logprob ~ -0.9 (passes whisper's
// -1 threshold), top-1 margins are wide enough for fp16 parity, and text logits beat the
// timestamps' summed probability as in a trained model. Argmax is unchanged by it.
constexpr double kDecoderFinalGamma = 16.0;
// Embedding rows after <|endoftext|> (sot, languages, tasks, timestamps) are scaled by
// this (exact), so their tied logits rarely win: at full scale, --no-timestamps decoding
// emitted timestamp tokens, which trained models do not.
constexpr float kSpecialRowScale = 0.5f;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

struct Scale {
  double mean = 0, std = 0;
};

// The distribution of one tensor, by its role in the name.
Scale scale_of(const std::string& name, const WhisperConfig& c) {
  const double d = c.n_audio_state;
  const bool decoder = contains(name, ".decoder.");
  const bool bias = ends_with(name, ".bias");
  if (name == "model.decoder.layer_norm.weight") return {kDecoderFinalGamma, kGammaStd};
  if (contains(name, "layer_norm")) return bias ? Scale{0, kBetaStd} : Scale{1, kGammaStd};
  if (bias) return {0, kBiasStd};
  // Convolutions: unit-scale outputs (Xavier-like on fan_in = channels * 3) so the audio
  // weighs as much as the sinusoidal positions added after them.
  if (contains(name, "conv1.")) return {0, 1.0 / std::sqrt(3.0 * c.n_mels)};
  if (contains(name, "conv2.")) return {0, 1.0 / std::sqrt(3.0 * d)};
  if (decoder && contains(name, "embed_positions")) return {0, kDecoderPositionStd};
  if (decoder && contains(name, "encoder_attn.")) {
    const bool qk = contains(name, "q_proj") || contains(name, "k_proj");
    return {0, (qk ? kCrossQkGain : kCrossVoGain) / std::sqrt(d)};
  }
  // GPT-2's residual scaling: 2 * n_layers branches add into the encoder's stream; at
  // plain 0.02 the frame-independent part of each attention output (near-uniform
  // attention averages the frames) piles up in deep, wide encoders until every frame
  // looks alike and the decoder's cross-attention sees one vector (small collapsed).
  if (!decoder && (contains(name, "self_attn.out_proj") || contains(name, "fc2.")))
    return {0, kMatrixStd / std::sqrt(2.0 * c.n_audio_layer)};
  if (decoder && (contains(name, "self_attn.out_proj") || contains(name, "fc2.")))
    return {0, kMatrixStd * kDecoderSelfScale};
  return {0, kMatrixStd};
}

// ---- files ----

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  check(bool(out), ErrorKind::internal, "[synth] " + path.string() + ": cannot write");
}

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    default: break;
  }
  throw Error(ErrorKind::invalid_argument, "[synth] dtype must be f32, f16 or bf16");
}

// Streams model.safetensors tensor by tensor (large-v3 in f32 is 6 GB; nothing is held
// beyond one tensor).
void write_weights(const fs::path& path, const WhisperConfig& config,
                   const std::vector<SynthTensorSpec>& specs, uint64_t seed, DType dtype) {
  const size_t elem = dtype_size(dtype);
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}, {"generator", "parley synth"}};
  uint64_t offset = 0;
  for (const auto& s : specs) {
    const uint64_t bytes = uint64_t(s.shape.numel()) * elem;
    header[s.name] = {{"dtype", safetensors_dtype(dtype)},
                      {"shape", std::vector<int64_t>(s.shape.begin(), s.shape.end())},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();  // nlohmann orders keys: deterministic
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  check(bool(out), ErrorKind::internal, "[synth] " + path.string() + ": cannot create");
  const uint64_t header_size = text.size();
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = uint8_t(header_size >> (8 * i));
  out.write(reinterpret_cast<const char*>(le), 8);
  out.write(text.data(), std::streamsize(text.size()));
  std::vector<uint16_t> half;
  for (const auto& s : specs) {
    const std::vector<float> v = synth_tensor_values(config, s, seed);
    if (dtype == DType::f32) {
      out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
      continue;
    }
    half.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      half[i] = dtype == DType::f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    out.write(reinterpret_cast<const char*>(half.data()), std::streamsize(half.size() * 2));
  }
  check(bool(out), ErrorKind::internal, "[synth] " + path.string() + ": write failed");
}

}  // namespace

std::vector<std::string> synth_shape_names() {
  std::vector<std::string> names;
  for (const auto& s : kShapes) names.emplace_back(s.name);
  return names;
}

WhisperConfig synth_config(std::string_view shape) {
  for (const auto& s : kShapes) {
    if (shape != s.name) continue;
    WhisperConfig c;
    c.n_mels = s.n_mels;
    c.n_audio_ctx = 1500;
    c.n_audio_state = s.d;
    c.n_audio_head = s.heads;
    c.n_audio_layer = s.enc_layers;
    c.n_vocab = s.n_vocab;
    c.n_text_ctx = 448;
    c.n_text_state = s.d;
    c.n_text_head = s.heads;
    c.n_text_layer = s.dec_layers;
    return c;
  }
  std::string names;
  for (const auto& n : synth_shape_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::invalid_argument, "[synth] unknown whisper shape \"" + std::string(shape) +
                                               "\" (one of " + names + ")");
}

std::vector<SynthTensorSpec> synth_tensor_specs(const WhisperConfig& c) {
  const int64_t d = c.n_audio_state, ff = 4 * d;
  std::map<std::string, Shape> m;
  auto ln = [&](const std::string& p) {
    m[p + ".weight"] = {d};
    m[p + ".bias"] = {d};
  };
  auto linear = [&](const std::string& p, int64_t out, int64_t in, bool bias = true) {
    m[p + ".weight"] = {out, in};
    if (bias) m[p + ".bias"] = {out};
  };
  auto attention = [&](const std::string& p) {
    linear(p + ".q_proj", d, d);
    linear(p + ".k_proj", d, d, /*bias=*/false);  // Whisper's key projection has no bias
    linear(p + ".v_proj", d, d);
    linear(p + ".out_proj", d, d);
  };
  const std::string enc = "model.encoder", dec = "model.decoder";
  m[enc + ".conv1.weight"] = {d, c.n_mels, 3};
  m[enc + ".conv1.bias"] = {d};
  m[enc + ".conv2.weight"] = {d, d, 3};
  m[enc + ".conv2.bias"] = {d};
  m[enc + ".embed_positions.weight"] = {c.n_audio_ctx, d};
  for (int i = 0; i < c.n_audio_layer; ++i) {
    const std::string p = enc + ".layers." + std::to_string(i);
    ln(p + ".self_attn_layer_norm");
    attention(p + ".self_attn");
    ln(p + ".final_layer_norm");
    linear(p + ".fc1", ff, d);
    linear(p + ".fc2", d, ff);
  }
  ln(enc + ".layer_norm");
  m[dec + ".embed_tokens.weight"] = {c.n_vocab, d};
  m[dec + ".embed_positions.weight"] = {c.n_text_ctx, d};
  for (int i = 0; i < c.n_text_layer; ++i) {
    const std::string p = dec + ".layers." + std::to_string(i);
    ln(p + ".self_attn_layer_norm");
    attention(p + ".self_attn");
    ln(p + ".encoder_attn_layer_norm");
    attention(p + ".encoder_attn");
    ln(p + ".final_layer_norm");
    linear(p + ".fc1", ff, d);
    linear(p + ".fc2", d, ff);
  }
  ln(dec + ".layer_norm");
  std::vector<SynthTensorSpec> specs;
  for (auto& [name, shape] : m) specs.push_back({name, shape});
  return specs;
}

std::vector<float> synth_tensor_values(const WhisperConfig& config, const SynthTensorSpec& spec,
                                       uint64_t seed) {
  std::vector<float> v(size_t(spec.shape.numel()));
  if (spec.name == "model.encoder.embed_positions.weight") {
    fill_sinusoids(v, spec.shape[0], spec.shape[1]);
    return v;
  }
  uint64_t state = seed ^ fnv1a(spec.name);
  const Scale s = scale_of(spec.name, config);
  fill_normal(v, splitmix64(state), s.mean, s.std);
  if (spec.name == "model.decoder.embed_tokens.weight") {
    const int64_t d = spec.shape[1];
    const int64_t eot = config.n_vocab >= 51865 ? 50257 : 50256;
    for (size_t i = size_t((eot + 1) * d); i < v.size(); ++i) v[i] *= kSpecialRowScale;
  }
  return v;
}

std::string synth_config_json(const WhisperConfig& c, int32_t eot) {
  const int32_t sot = eot + 1;
  const int num_languages = c.n_vocab - eot - 8 - 1501;
  const int32_t no_timestamps = eot + 2 + num_languages + 5;
  json j = {
      {"_name_or_path", "parley-synth"},
      {"architectures", {"WhisperForConditionalGeneration"}},
      {"model_type", "whisper"},
      {"activation_function", "gelu"},
      {"activation_dropout", 0.0},
      {"attention_dropout", 0.0},
      {"dropout", 0.0},
      {"encoder_layerdrop", 0.0},
      {"decoder_layerdrop", 0.0},
      {"init_std", 0.02},
      {"scale_embedding", false},
      {"use_cache", true},
      {"use_weighted_layer_sum", false},
      {"apply_spec_augment", false},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
      {"d_model", c.n_audio_state},
      {"encoder_layers", c.n_audio_layer},
      {"decoder_layers", c.n_text_layer},
      {"num_hidden_layers", c.n_audio_layer},
      {"encoder_attention_heads", c.n_audio_head},
      {"decoder_attention_heads", c.n_text_head},
      {"encoder_ffn_dim", 4 * c.n_audio_state},
      {"decoder_ffn_dim", 4 * c.n_text_state},
      {"num_mel_bins", c.n_mels},
      {"vocab_size", c.n_vocab},
      {"max_source_positions", c.n_audio_ctx},
      {"max_target_positions", c.n_text_ctx},
      {"max_length", c.n_text_ctx},
      {"bos_token_id", eot},
      {"eos_token_id", eot},
      {"pad_token_id", eot},
      {"decoder_start_token_id", sot},
      {"begin_suppress_tokens", {220, eot}},
      {"forced_decoder_ids", nullptr},
      {"median_filter_width", 7},
      {"num_languages", num_languages},
      {"no_timestamps_token_id", no_timestamps},
  };
  return j.dump(2) + "\n";
}

std::vector<std::pair<int32_t, int32_t>> merges_from_ranks(const std::vector<std::string>& ranks) {
  std::unordered_map<std::string_view, int32_t> rank_of;
  rank_of.reserve(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) rank_of.emplace(ranks[r], int32_t(r));
  auto rank = [&](std::string_view s) {
    auto it = rank_of.find(s);
    return it == rank_of.end() ? -1 : it->second;
  };
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<std::string_view> parts;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string_view token = ranks[r];
    if (token.size() < 2) continue;
    // tiktoken's byte_pair_merge limited to ranks < r: merge the lowest-ranked adjacent
    // pair until none below r is left; two parts must remain.
    parts.clear();
    for (size_t i = 0; i < token.size(); ++i) parts.push_back(token.substr(i, 1));
    while (parts.size() > 2) {
      int32_t best = -1;
      size_t at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const std::string_view pair(parts[i].data(), parts[i].size() + parts[i + 1].size());
        const int32_t pr = rank(pair);
        if (pr >= 0 && pr < int32_t(r) && (best < 0 || pr < best)) {
          best = pr;
          at = i;
        }
      }
      if (best < 0) break;
      parts[at] = std::string_view(parts[at].data(), parts[at].size() + parts[at + 1].size());
      parts.erase(parts.begin() + std::ptrdiff_t(at) + 1);
    }
    check(parts.size() == 2, ErrorKind::invalid_argument,
          "[synth] token of rank " + std::to_string(r) +
              " is not the merge of two lower-ranked tokens");
    merges.emplace_back(rank(parts[0]), rank(parts[1]));
  }
  return merges;
}

void write_hf_tokenizer_files(const std::vector<std::string>& ranks, bool multilingual, int n_vocab,
                              const std::string& vocab_name, const std::string& dir) {
  const WhisperTokenizer whisper =
      WhisperTokenizer::from_tiktoken(vocab_name, multilingual, n_vocab);
  check_arg(whisper.eot() == int32_t(ranks.size()),
            "[synth] " + vocab_name + ": eot does not follow the ranks");
  json vocab = json::object();
  for (size_t r = 0; r < ranks.size(); ++r) vocab[bytes_to_unicode(ranks[r])] = int32_t(r);
  json merges = json::array();
  std::string merges_txt = "#version: 0.2\n";
  for (const auto& [a, b] : merges_from_ranks(ranks)) {
    std::string line =
        bytes_to_unicode(ranks[size_t(a)]) + " " + bytes_to_unicode(ranks[size_t(b)]);
    merges_txt += line + "\n";
    merges.push_back(std::move(line));
  }
  json added = json::array();
  for (int32_t id = whisper.eot(); id < n_vocab; ++id)
    added.push_back({{"id", id},
                     {"content", whisper.token_bytes(id)},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  json tok = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", byte_level},
              {"post_processor", byte_level},
              {"decoder", byte_level},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", merges}}}};
  const fs::path root(dir);
  write_text(root / "tokenizer.json", tok.dump(2) + "\n");
  write_text(root / "vocab.json", vocab.dump() + "\n");
  write_text(root / "merges.txt", merges_txt);
}

void write_synth_whisper(const SynthOptions& o, const std::string& dir) {
  const WhisperConfig config = synth_config(o.shape);
  check_arg(!o.vocab_path.empty(),
            "[synth] no vocabulary: pass --vocab PATH to a .tiktoken ranks file "
            "(multilingual.tiktoken for the " +
                o.shape + " shape); parley ships none");
  const std::vector<std::string> ranks = load_tiktoken_ranks(o.vocab_path);
  safetensors_dtype(o.dtype);  // rejects other dtypes before anything is written
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec, ErrorKind::internal, "[synth] " + dir + ": cannot create: " + ec.message());
  const fs::path root(dir);
  write_text(root / "config.json", synth_config_json(config, int32_t(ranks.size())));
  write_hf_tokenizer_files(ranks, config.multilingual(), config.n_vocab, o.vocab_path, dir);
  if (o.write_weights)
    write_weights(root / "model.safetensors", config, synth_tensor_specs(config), o.seed, o.dtype);
}

}  // namespace parley
