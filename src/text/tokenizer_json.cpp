// Tokenizer::from_file / from_dir: Hugging Face tokenizer.json (and tokenizer_config.json,
// generation_config.json) into a TokenizerSpec. Every component type the pipeline cannot run
// is refused with Error(unsupported) naming it, rather than tokenizing differently.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"
#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/tokenizer_spec.h"

namespace parley {
namespace {

using nlohmann::json;
using namespace tok;

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& problem) {
  throw Error(kind, "[tokenizer] " + name + ": " + problem);
}

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::not_found, path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_argument, path, std::string("bad JSON: ") + e.what());
  }
}

struct Loader {
  std::string name;

  std::shared_ptr<const TokRegex> regex(const std::string& pattern) const {
    return std::make_shared<const TokRegex>(pattern, name);
  }
  // A {"String": s} or {"Regex": r} pattern as a regex.
  std::shared_ptr<const TokRegex> pattern(const json& p) const {
    if (p.contains("Regex")) return regex(p.at("Regex").get<std::string>());
    if (p.contains("String")) return regex(regex_literal(p.at("String").get<std::string>()));
    fail(ErrorKind::invalid_argument, name, "pattern is neither String nor Regex");
  }
  std::string type_of(const json& j, const char* what) const {
    if (!j.is_object() || !j.contains("type"))
      fail(ErrorKind::invalid_argument, name, std::string(what) + " has no type");
    return j.at("type").get<std::string>();
  }

  void normalizer(const json& j, std::vector<NormalizerStep>& out) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "normalizer");
    using K = NormalizerStep::Kind;
    NormalizerStep s;
    if (type == "Sequence") {
      for (const json& n : j.at("normalizers")) normalizer(n, out);
      return;
    } else if (type == "NFC") {
      s.kind = K::nfc;
    } else if (type == "NFD") {
      s.kind = K::nfd;
    } else if (type == "NFKC") {
      s.kind = K::nfkc;
    } else if (type == "NFKD") {
      s.kind = K::nfkd;
    } else if (type == "Lowercase") {
      s.kind = K::lowercase;
    } else if (type == "StripAccents") {
      s.kind = K::strip_accents;
    } else if (type == "Replace") {
      s.kind = K::replace;
      s.pattern = pattern(j.at("pattern"));
      s.content = j.at("content").get<std::string>();
    } else if (type == "Prepend") {
      s.kind = K::prepend;
      s.content = j.at("prepend").get<std::string>();
    } else if (type == "Strip") {
      s.kind = K::strip;
      s.left = j.value("strip_left", true);
      s.right = j.value("strip_right", true);
    } else {
      fail(ErrorKind::unsupported, name, "normalizer " + type + " is not supported");
    }
    out.push_back(std::move(s));
  }

  static SplitBehavior behavior(const std::string& b, const std::string& name) {
    if (b == "Isolated") return SplitBehavior::isolated;
    if (b == "Removed") return SplitBehavior::removed;
    if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
    if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
    if (b == "Contiguous") return SplitBehavior::contiguous;
    fail(ErrorKind::invalid_argument, name, "unknown split behavior " + b);
  }

  static PrependScheme scheme(const json& j) {
    if (j.contains("prepend_scheme")) {
      std::string s = j.at("prepend_scheme").get<std::string>();
      return s == "first"   ? PrependScheme::first
             : s == "never" ? PrependScheme::never
                            : PrependScheme::always;
    }
    // Older files: add_prefix_space (default true).
    return j.value("add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
  }

  void split(std::shared_ptr<const TokRegex> re, SplitBehavior b, bool invert,
             std::vector<PreTokenizerStep>& out) const {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::Kind::split;
    s.pattern = std::move(re);
    s.behavior = b;
    s.invert = invert;
    out.push_back(std::move(s));
  }

  void pre_tokenizer(const json& j, std::vector<PreTokenizerStep>& out) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "pre_tokenizer");
    static const std::string kPunct = R"([\p{P}\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e])";
    if (type == "Sequence") {
      for (const json& p : j.at("pretokenizers")) pre_tokenizer(p, out);
    } else if (type == "Split") {
      split(pattern(j.at("pattern")), behavior(j.at("behavior").get<std::string>(), name),
            j.value("invert", false), out);
    } else if (type == "ByteLevel") {
      PreTokenizerStep s;
      s.kind = PreTokenizerStep::Kind::byte_level;
      s.add_prefix_space = j.value("add_prefix_space", true);
      if (j.value("use_regex", true)) s.pattern = regex(std::string(kGpt2SplitPattern));
      out.push_back(std::move(s));
    } else if (type == "Metaspace") {
      PreTokenizerStep s;
      s.kind = PreTokenizerStep::Kind::metaspace;
      s.replacement = j.value("replacement", std::string("\xe2\x96\x81"));
      s.prepend_scheme = scheme(j);
      s.split = j.value("split", true);
      s.pattern = regex(regex_literal(s.replacement));
      out.push_back(std::move(s));
    } else if (type == "Digits") {
      bool individual = j.value("individual_digits", false);
      split(regex(R"(\p{N})"), individual ? SplitBehavior::isolated : SplitBehavior::contiguous,
            false, out);
    } else if (type == "Punctuation") {
      split(regex(kPunct), behavior(j.value("behavior", std::string("Isolated")), name), false,
            out);
    } else if (type == "Whitespace") {
      split(regex(R"(\w+|[^\w\s]+)"), SplitBehavior::removed, true, out);
    } else if (type == "WhitespaceSplit") {
      split(regex(R"(\s)"), SplitBehavior::removed, false, out);
    } else if (type == "BertPreTokenizer") {
      split(regex(R"(\s)"), SplitBehavior::removed, false, out);
      split(regex(kPunct), SplitBehavior::isolated, false, out);
    } else {
      fail(ErrorKind::unsupported, name, "pre_tokenizer " + type + " is not supported");
    }
  }

  void model(const json& j, Model& m) const {
    std::string type =
        j.contains("type") ? j.at("type").get<std::string>() : (j.contains("merges") ? "BPE" : "");
    if (type != "BPE")
      fail(ErrorKind::unsupported, name,
           "model type " + (type.empty() ? std::string("(none)") : type) +
               " is not supported (only BPE)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json v = j.value(key, json());
      if (v.is_string() && !v.get<std::string>().empty())
        fail(ErrorKind::unsupported, name, std::string("BPE ") + key + " is not supported");
    }
    const json dropout = j.value("dropout", json());
    if (dropout.is_number() && dropout.get<double>() > 0)
      fail(ErrorKind::unsupported, name, "BPE dropout is not supported");
    m.kind = Model::Kind::bpe;
    m.byte_fallback = j.value("byte_fallback", false);
    m.ignore_merges = j.value("ignore_merges", false);
    m.fuse_unk = j.value("fuse_unk", false);
    const json& vocab = j.at("vocab");
    if (!vocab.is_object()) fail(ErrorKind::invalid_argument, name, "model.vocab is not an object");
    m.vocab.reserve(vocab.size());
    int32_t max_id = -1;
    for (auto& [token, id] : vocab.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        fail(ErrorKind::invalid_argument, name, "vocab id of \"" + token + "\" is not valid");
      m.vocab.emplace(token, id.get<int32_t>());
      max_id = std::max(max_id, id.get<int32_t>());
    }
    m.id_to_token.assign(size_t(max_id + 1), std::string());
    for (auto& [token, id] : m.vocab) {
      if (!m.id_to_token[id].empty())
        fail(ErrorKind::invalid_argument, name, "vocab id " + std::to_string(id) + " repeats");
      m.id_to_token[id] = token;
    }
    const json unk = j.value("unk_token", json());
    if (unk.is_string()) {
      auto it = m.vocab.find(unk.get<std::string>());
      if (it == m.vocab.end())
        fail(ErrorKind::invalid_argument, name,
             "unk_token " + unk.get<std::string>() + " not in vocab");
      m.unk_id = it->second;
    }
    const json& merges = j.at("merges");
    if (!merges.is_array()) fail(ErrorKind::invalid_argument, name, "model.merges is not an array");
    m.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string a, b;
      const json& e = merges[i];
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos)
          fail(ErrorKind::invalid_argument, name, "merge " + std::to_string(i) + " is not \"a b\"");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        fail(ErrorKind::invalid_argument, name, "merge " + std::to_string(i) + " is malformed");
      }
      auto ia = m.vocab.find(a), ib = m.vocab.find(b), iab = m.vocab.find(a + b);
      if (ia == m.vocab.end() || ib == m.vocab.end() || iab == m.vocab.end())
        fail(ErrorKind::invalid_argument, name,
             "merge " + std::to_string(i) + " (" + a + " " + b + ") names a token not in vocab");
      // The first (highest priority) entry of a repeated pair wins.
      m.merges.emplace(uint64_t(uint32_t(ia->second)) << 32 | uint32_t(ib->second),
                       std::pair{int32_t(i), iab->second});
    }
  }

  void decoder(const json& j, std::vector<DecoderStep>& out) const {
    std::string type = type_of(j, "decoder");
    using K = DecoderStep::Kind;
    DecoderStep d;
    if (type == "Sequence") {
      for (const json& x : j.at("decoders")) decoder(x, out);
      return;
    } else if (type == "ByteLevel") {
      d.kind = K::byte_level;
    } else if (type == "ByteFallback") {
      d.kind = K::byte_fallback;
    } else if (type == "Fuse") {
      d.kind = K::fuse;
    } else if (type == "Replace") {
      d.kind = K::replace;
      const json& p = j.at("pattern");
      if (!p.contains("String"))
        fail(ErrorKind::unsupported, name, "decoder Replace with a Regex pattern is not supported");
      d.pattern = p.at("String").get<std::string>();
      d.content = j.at("content").get<std::string>();
    } else if (type == "Strip") {
      d.kind = K::strip;
      d.content = j.at("content").get<std::string>();
      d.start = j.value("start", 0);
      d.stop = j.value("stop", 0);
    } else if (type == "Metaspace") {
      d.kind = K::metaspace;
      d.replacement = j.value("replacement", std::string("\xe2\x96\x81"));
      d.prepend_scheme = scheme(j);
    } else {
      fail(ErrorKind::unsupported, name, "decoder " + type + " is not supported");
    }
    out.push_back(std::move(d));
  }

  // The "single" template of a post-processor; false when it adds nothing.
  void post_processor(const json& j, const TokenizerSpec& spec,
                      std::vector<TemplatePiece>& out) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "post_processor");
    auto id_of = [&](const json& pair) {
      // BertProcessing / RobertaProcessing: ["[CLS]", 101]
      return pair.at(1).get<int32_t>();
    };
    if (type == "ByteLevel") return;
    if (type == "Sequence") {
      for (const json& p : j.at("processors")) post_processor(p, spec, out);
      return;
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      out = {{false, {id_of(j.at("cls"))}}, {true, {}}, {false, {id_of(j.at("sep"))}}};
      return;
    }
    if (type != "TemplateProcessing")
      fail(ErrorKind::unsupported, name, "post_processor " + type + " is not supported");
    const json& specials = j.value("special_tokens", json::object());
    out.clear();
    for (const json& piece : j.at("single")) {
      if (piece.contains("Sequence")) {
        out.push_back({true, {}});
      } else if (piece.contains("SpecialToken")) {
        std::string key = piece.at("SpecialToken").at("id").get<std::string>();
        if (!specials.contains(key))
          fail(ErrorKind::invalid_argument, name, "template names unknown special token " + key);
        out.push_back({false, specials.at(key).at("ids").get<std::vector<int32_t>>()});
      } else {
        fail(ErrorKind::invalid_argument, name,
             "template piece is neither Sequence nor SpecialToken");
      }
    }
  }
};

TokenizerSpec load_spec(const json& j, const std::string& name) {
  TokenizerSpec spec;
  spec.name = name;
  Loader l{name};
  try {
    if (!j.is_object() || !j.contains("model"))
      fail(ErrorKind::invalid_argument, name, "not a tokenizer.json (no model)");
    l.model(j.at("model"), spec.model);
    l.normalizer(j.value("normalizer", json()), spec.normalizer);
    l.pre_tokenizer(j.value("pre_tokenizer", json()), spec.pre_tokenizer);
    const json dec = j.value("decoder", json());
    if (!dec.is_null()) {
      spec.has_decoder = true;
      l.decoder(dec, spec.decoder);
    }
    for (const json& t : j.value("added_tokens", json::array())) {
      AddedToken a;
      a.content = t.at("content").get<std::string>();
      a.id = t.at("id").get<int32_t>();
      a.special = t.value("special", false);
      a.lstrip = t.value("lstrip", false);
      a.rstrip = t.value("rstrip", false);
      a.single_word = t.value("single_word", false);
      a.normalized = t.value("normalized", !a.special);
      spec.added_tokens.push_back(std::move(a));
    }
    l.post_processor(j.value("post_processor", json()), spec, spec.template_single);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_argument, name, std::string("malformed tokenizer.json: ") + e.what());
  }
  // BOS / EOS as the template adds them: fixed ids before and after the text.
  bool seen_sequence = false;
  for (const TemplatePiece& p : spec.template_single) {
    if (p.sequence) {
      seen_sequence = true;
    } else if (p.ids.size() == 1) {
      (seen_sequence ? spec.eos_id : spec.bos_id) = p.ids[0];
    }
  }
  if (spec.eos_id >= 0) spec.eos_ids = {spec.eos_id};
  return spec;
}

// tokenizer_config.json's bos_token / eos_token: a string, {"content": ...} or null.
std::string config_token(const json& config, const char* key) {
  const json v = config.value(key, json());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return {};
}

void add_eos(std::vector<int32_t>& eos_ids, int32_t id) {
  if (id >= 0 && std::find(eos_ids.begin(), eos_ids.end(), id) == eos_ids.end())
    eos_ids.push_back(id);
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& tokenizer_json) {
  return Tokenizer(load_spec(read_json(tokenizer_json), tokenizer_json));
}

Tokenizer Tokenizer::from_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(model_dir) / "tokenizer.json").string();
  json j = read_json(path);
  TokenizerSpec spec = load_spec(j, path);
  // Ids of tokenizer_config.json's named tokens resolve against the vocabulary and the
  // added tokens, as transformers does.
  Tokenizer plain(spec);
  const fs::path config_path = fs::path(model_dir) / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    json config = read_json(config_path.string());
    auto resolve = [&](const char* key) -> int32_t {
      std::string t = config_token(config, key);
      if (t.empty()) return -1;
      int32_t id = plain.token_id(t);
      if (id < 0)
        fail(ErrorKind::invalid_argument, config_path.string(),
             std::string(key) + " \"" + t + "\" is not a token");
      return id;
    };
    if (config.contains("bos_token")) spec.bos_id = resolve("bos_token");
    if (config.contains("eos_token")) {
      spec.eos_id = resolve("eos_token");
      spec.eos_ids.clear();
      add_eos(spec.eos_ids, spec.eos_id);
    }
    // The flags decide only for a tokenizer.json without a post-processor (Llama 2 era
    // files, where LlamaTokenizerFast added BOS). A template in the file wins, as in
    // transformers 5, whose generic TokenizersBackend ignores the flags.
    if (j.value("post_processor", json()).is_null()) {
      bool add_bos = config.value("add_bos_token", false) && spec.bos_id >= 0;
      bool add_eos = config.value("add_eos_token", false) && spec.eos_id >= 0;
      spec.template_single.clear();
      if (add_bos) spec.template_single.push_back({false, {spec.bos_id}});
      spec.template_single.push_back({true, {}});
      if (add_eos) spec.template_single.push_back({false, {spec.eos_id}});
    }
  }
  const fs::path gen_path = fs::path(model_dir) / "generation_config.json";
  if (fs::exists(gen_path)) {
    json gen = read_json(gen_path.string());
    const json e = gen.value("eos_token_id", json());
    try {
      if (e.is_number_integer()) add_eos(spec.eos_ids, e.get<int32_t>());
      if (e.is_array())
        for (const json& x : e) add_eos(spec.eos_ids, x.get<int32_t>());
    } catch (const json::exception& ex) {
      fail(ErrorKind::invalid_argument, gen_path.string(),
           std::string("bad eos_token_id: ") + ex.what());
    }
    if (spec.eos_id < 0 && !spec.eos_ids.empty()) spec.eos_id = spec.eos_ids[0];
  }
  return Tokenizer(std::move(spec));
}

}  // namespace parley
