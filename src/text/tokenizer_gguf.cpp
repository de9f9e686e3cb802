// Tokenizer::from_gguf: a GGUF file's tokenizer.ggml.* metadata into a TokenizerSpec that
// tokenizes as the model's Hugging Face tokenizer does. tokenizer.ggml.pre names the
// pre-tokenizer family (llama.cpp's llama-vocab.cpp lists them); each family here is
// written as the Hugging Face pre-tokenizer sequence its tokenizer.json carries.
#include <algorithm>
#include <variant>

#include "engine/error.h"
#include "io/gguf.h"
#include "text/tokenizer.h"
#include "text/tokenizer_spec.h"

namespace parley {
namespace {

using namespace tok;

constexpr std::string_view kMetaspace = "\xe2\x96\x81";  // U+2581

// llama.cpp's token types (llama_token_type).
enum TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& problem) {
  throw Error(kind, "[tokenizer] " + name + ": " + problem);
}

struct Meta {
  const io::GgufFile& f;
  std::string name;

  std::string string(const std::string& key, const std::string& fallback = "") const {
    const io::GgufValue* v = f.find(key);
    if (v == nullptr) return fallback;
    if (auto* s = std::get_if<std::string>(v)) return *s;
    fail(ErrorKind::invalid_argument, name, key + " is not a string");
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    const io::GgufValue* v = f.find(key);
    if (v == nullptr) return fallback;
    return std::visit(
        [&](const auto& x) -> int64_t {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return int64_t(x);
          fail(ErrorKind::invalid_argument, name, key + " is not an integer");
        },
        *v);
  }
  bool boolean(const std::string& key, bool fallback) const {
    const io::GgufValue* v = f.find(key);
    if (v == nullptr) return fallback;
    if (auto* b = std::get_if<bool>(v)) return *b;
    fail(ErrorKind::invalid_argument, name, key + " is not a boolean");
  }
  template <typename T>
  const std::vector<T>* array(const std::string& key) const {
    const io::GgufValue* v = f.find(key);
    if (v == nullptr) return nullptr;
    auto* a = std::get_if<io::GgufArray>(v);
    const std::vector<T>* items = a ? std::get_if<std::vector<T>>(&a->items) : nullptr;
    if (items == nullptr)
      fail(ErrorKind::invalid_argument, name, key + " is not an array of the expected type");
    return items;
  }
  // token_type may be stored with any integer width.
  std::vector<int32_t> int_array(const std::string& key) const {
    const io::GgufValue* v = f.find(key);
    if (v == nullptr) return {};
    auto* a = std::get_if<io::GgufArray>(v);
    if (a == nullptr) fail(ErrorKind::invalid_argument, name, key + " is not an array");
    return std::visit(
        [&](const auto& items) -> std::vector<int32_t> {
          using T = typename std::decay_t<decltype(items)>::value_type;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            return std::vector<int32_t>(items.begin(), items.end());
          } else {
            fail(ErrorKind::invalid_argument, name, key + " is not an integer array");
          }
        },
        a->items);
  }
};

std::shared_ptr<const TokRegex> regex(const std::string& pattern, const std::string& name) {
  return std::make_shared<const TokRegex>(pattern, name);
}

PreTokenizerStep split(const std::string& pattern, const std::string& name,
                       SplitBehavior behavior = SplitBehavior::isolated) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::split;
  s.pattern = regex(pattern, name);
  s.behavior = behavior;
  return s;
}

PreTokenizerStep byte_level(bool use_regex, const std::string& name) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::byte_level;
  if (use_regex) s.pattern = regex(std::string(kGpt2SplitPattern), name);
  return s;
}

// The Hugging Face pre-tokenizer (and normalizer) of each tokenizer.ggml.pre family; returns
// whether the family adds BOS when the file does not say (llama.cpp: the Llama 3 family).
bool byte_level_family(const std::string& pre, TokenizerSpec& spec) {
  const std::string& n = spec.name;
  auto& steps = spec.pre_tokenizer;
  auto nfc = [&] {
    NormalizerStep s;
    s.kind = NormalizerStep::Kind::nfc;
    spec.normalizer.push_back(s);
  };
  const std::string digit = R"(\p{N})";
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo" ||
      pre == "jais") {
    if (pre == "mpt") nfc();  // GPT-NeoX's tokenizer.json
    steps.push_back(byte_level(true, n));
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "falcon3" ||
             pre == "falcon-h1" || pre == "pixtral" || pre == "midm-2.0" || pre == "lfm2" ||
             pre == "dbrx" || pre == "smaug-bpe") {
    steps.push_back(split(
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
        n));
    steps.push_back(byte_level(false, n));
    spec.model.ignore_merges = true;
    return pre != "dbrx" && pre != "smaug-bpe";
  } else if (pre == "qwen2" || pre == "stablelm2" || pre == "hunyuan") {
    if (pre == "qwen2") nfc();
    steps.push_back(split(
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
        n));
    steps.push_back(byte_level(false, n));
  } else if (pre == "qwen35") {  // no normalizer, unlike qwen2
    steps.push_back(split(
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
        n));
    steps.push_back(byte_level(false, n));
  } else if (pre == "deepseek-coder") {
    steps.push_back(split(R"([\r\n])", n));
    steps.push_back(split(R"(\s?\p{L}+)", n));
    steps.push_back(split(R"(\s?\p{P}+)", n));
    steps.push_back(split("[一-龥ࠀ-一가-퟿]+", n));
    steps.push_back(split(digit, n));
    steps.push_back(byte_level(false, n));
  } else if (pre == "deepseek-llm") {
    steps.push_back(split(R"([\r\n])", n));
    steps.push_back(split(
        // The letters of the cased scripts, as code points (an NFC editor would alter some).
        "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"
        "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}"
        "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-"
        "\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}"
        "\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-"
        "\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}"
        "\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"
        "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}"
        "\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-"
        "\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}"
        "\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}"
        "\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}"
        "\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-"
        "\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}"
        "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}"
        "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}"
        "\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+",
        n));
    steps.push_back(split("\\s?[!-/:-~！-／：-～‘-‟　-。]+", n));
    steps.push_back(split(R"(\s+$)", n));
    steps.push_back(split("[一-龥ࠀ-一가-퟿]+", n));
    steps.push_back(split(digit, n));
    steps.push_back(byte_level(false, n));
  } else if (pre == "falcon") {
    steps.push_back(
        split(R"([\p{P}\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e])", n, SplitBehavior::contiguous));
    steps.push_back(byte_level(true, n));
    steps.push_back(split(digit, n, SplitBehavior::contiguous));
    steps.push_back(split("[0-9][0-9][0-9]", n));
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
             pre == "codeshell" || pre == "exaone" || pre == "minerva") {
    if (pre == "command-r") nfc();
    steps.push_back(split(digit, n));
    steps.push_back(byte_level(true, n));
  } else {
    fail(ErrorKind::unsupported, n, "tokenizer.ggml.pre \"" + pre + "\" is not supported");
  }
  return false;
}

DecoderStep decoder(DecoderStep::Kind kind) {
  DecoderStep d;
  d.kind = kind;
  return d;
}

// Replace("▁", " "), ByteFallback, Fuse, then Strip(" ", 1, 0) when a space is prepended.
void sentencepiece_decoder(TokenizerSpec& spec, bool strip_prefix_space) {
  DecoderStep r = decoder(DecoderStep::Kind::replace);
  r.pattern = std::string(kMetaspace);
  r.content = " ";
  spec.decoder = {r, decoder(DecoderStep::Kind::byte_fallback), decoder(DecoderStep::Kind::fuse)};
  if (strip_prefix_space) {
    DecoderStep s = decoder(DecoderStep::Kind::strip);
    s.content = " ";
    s.start = 1;
    spec.decoder.push_back(s);
  }
  spec.has_decoder = true;
}

void sentencepiece_normalizer(TokenizerSpec& spec, bool add_space_prefix) {
  if (add_space_prefix) {
    NormalizerStep p;
    p.kind = NormalizerStep::Kind::prepend;
    p.content = std::string(kMetaspace);
    spec.normalizer.push_back(p);
  }
  NormalizerStep r;
  r.kind = NormalizerStep::Kind::replace;
  r.pattern = regex(" ", spec.name);
  r.content = std::string(kMetaspace);
  spec.normalizer.push_back(r);
}

void add_merges(const Meta& meta, Model& m) {
  const auto* merges = meta.array<std::string>("tokenizer.ggml.merges");
  if (merges == nullptr) fail(ErrorKind::invalid_argument, meta.name, "no tokenizer.ggml.merges");
  m.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& s = (*merges)[i];
    size_t sp = s.find(' ', 1);
    if (sp == std::string::npos)
      fail(ErrorKind::invalid_argument, meta.name,
           "merge " + std::to_string(i) + " is not \"a b\"");
    std::string a = s.substr(0, sp), b = s.substr(sp + 1);
    auto ia = m.vocab.find(a), ib = m.vocab.find(b), iab = m.vocab.find(a + b);
    if (ia == m.vocab.end() || ib == m.vocab.end() || iab == m.vocab.end())
      fail(ErrorKind::invalid_argument, meta.name,
           "merge " + std::to_string(i) + " (" + s + ") names a token not in the vocabulary");
    m.merges.emplace(uint64_t(uint32_t(ia->second)) << 32 | uint32_t(ib->second),
                     std::pair{int32_t(i), iab->second});
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const io::GgufFile& file) {
  TokenizerSpec spec;
  spec.name = file.source().empty() ? std::string("gguf") : file.source();
  Meta meta{file, spec.name};
  const std::string model = meta.string("tokenizer.ggml.model");
  if (model.empty()) fail(ErrorKind::invalid_argument, spec.name, "no tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama" && model != "gemma4")
    fail(ErrorKind::unsupported, spec.name,
         "tokenizer.ggml.model \"" + model + "\" is not supported (gpt2, llama, gemma4)");
  const auto* tokens = meta.array<std::string>("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty())
    fail(ErrorKind::invalid_argument, spec.name, "no tokenizer.ggml.tokens");
  std::vector<int32_t> types = meta.int_array("tokenizer.ggml.token_type");
  if (!types.empty() && types.size() != tokens->size())
    fail(ErrorKind::invalid_argument, spec.name, "token_type and tokens differ in length");
  if (types.empty()) types.assign(tokens->size(), kNormal);

  Model& m = spec.model;
  m.id_to_token = *tokens;
  m.vocab.reserve(tokens->size());
  for (size_t id = 0; id < tokens->size(); ++id) {
    const std::string& t = (*tokens)[id];
    int32_t type = types[id];
    if (type == kControl || type == kUserDefined || type == kUnknown) {
      AddedToken a;
      a.content = t;
      a.id = int32_t(id);
      a.special = type != kUserDefined;
      if (!t.empty()) spec.added_tokens.push_back(std::move(a));
    }
    if (!t.empty()) m.vocab.emplace(t, int32_t(id));  // the first of repeated texts encodes
  }
  bool default_add_bos = model != "gpt2";
  const bool add_space_prefix = meta.boolean("tokenizer.ggml.add_space_prefix", model == "llama");
  if (model == "gpt2") {
    m.kind = Model::Kind::bpe;
    add_merges(meta, m);
    default_add_bos = byte_level_family(meta.string("tokenizer.ggml.pre", "default"), spec);
    spec.decoder = {decoder(DecoderStep::Kind::byte_level)};
    spec.has_decoder = true;
  } else if (model == "llama") {
    m.kind = Model::Kind::spm;
    const auto* scores = meta.array<float>("tokenizer.ggml.scores");
    if (scores == nullptr || scores->size() != tokens->size())
      fail(ErrorKind::invalid_argument, spec.name, "tokenizer.ggml.scores missing or short");
    m.scores = *scores;
    m.mergeable.resize(tokens->size());
    for (size_t id = 0; id < tokens->size(); ++id)
      m.mergeable[id] = types[id] == kNormal || types[id] == kUndefined;
    sentencepiece_normalizer(spec, add_space_prefix);
    sentencepiece_decoder(spec, add_space_prefix);
  } else {  // gemma4: SentencePiece-style BPE with merges over raw UTF-8, split at newlines
    m.kind = Model::Kind::bpe;
    m.byte_fallback = true;
    m.whole_newline_runs = true;
    add_merges(meta, m);
    sentencepiece_normalizer(spec, add_space_prefix);
    spec.pre_tokenizer.push_back(split("\n+", spec.name));
    sentencepiece_decoder(spec, add_space_prefix);
  }
  const int64_t n = int64_t(tokens->size());
  auto id_key = [&](const char* key) -> int32_t {
    int64_t id = meta.integer(key, -1);
    if (id >= n)
      fail(ErrorKind::invalid_argument, spec.name, std::string(key) + " is out of range");
    return int32_t(id);
  };
  m.unk_id = id_key("tokenizer.ggml.unknown_token_id");
  spec.bos_id = id_key("tokenizer.ggml.bos_token_id");
  spec.eos_id = id_key("tokenizer.ggml.eos_token_id");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    int32_t id = id_key(key);
    if (id >= 0 && std::find(spec.eos_ids.begin(), spec.eos_ids.end(), id) == spec.eos_ids.end())
      spec.eos_ids.push_back(id);
  }
  const bool add_bos = meta.boolean("tokenizer.ggml.add_bos_token", default_add_bos);
  const bool add_eos = meta.boolean("tokenizer.ggml.add_eos_token", false);
  if (add_bos && spec.bos_id >= 0) spec.template_single.push_back({false, {spec.bos_id}});
  spec.template_single.push_back({true, {}});
  if (add_eos && spec.eos_id >= 0) spec.template_single.push_back({false, {spec.eos_id}});
  return Tokenizer(std::move(spec));
}

}  // namespace parley
