// Hugging Face byte-level BPE loaders (tokenizer.json; vocab.json + merges.txt) and the
// ggml vocabulary adapter, all producing a BpeTokenizer.
#include "text/hf_tokenizer.h"

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"

namespace parley {
namespace {

using nlohmann::json;

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& problem) {
  throw Error(kind, "[tokenizer] " + name + ": " + problem);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::not_found, path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_argument, path, std::string("bad JSON: ") + e.what());
  }
}

// GPT-2's bytes_to_unicode table: printable Latin-1 bytes stand for themselves, the other
// 68 bytes map to 256, 257, ... in byte order.
const std::array<char32_t, 256>& byte_table() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
      t[b] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

// Decodes one UTF-8 code point at s[i], advancing i; -1 when malformed.
int64_t next_code_point(std::string_view s, size_t& i) {
  auto u = static_cast<unsigned char>(s[i]);
  int len = u < 0x80 ? 1 : (u >> 5) == 6 ? 2 : (u >> 4) == 14 ? 3 : (u >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return -1;
  int64_t cp = len == 1 ? u : u & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 2) return -1;
    cp = (cp << 6) | (c & 0x3f);
  }
  i += len;
  return cp;
}

// The regex our BpeTokenizer must split with to reproduce the json's pre_tokenizer.
std::string pre_tokenizer_pattern(const json& pre, const std::string& name) {
  auto byte_level_pattern = [&](const json& bl, bool need_regex) -> std::string {
    if (bl.value("add_prefix_space", false))
      fail(ErrorKind::unsupported, name, "ByteLevel add_prefix_space is not supported");
    bool use_regex = bl.value("use_regex", true);
    if (need_regex && !use_regex)
      fail(ErrorKind::unsupported, name, "ByteLevel without a regex has no pre-tokenizer");
    return use_regex ? std::string(kGpt2Pattern) : std::string();
  };
  if (!pre.is_object()) fail(ErrorKind::unsupported, name, "no pre_tokenizer");
  std::string type = pre.value("type", "");
  if (type == "ByteLevel") return byte_level_pattern(pre, true);
  if (type == "Sequence") {
    const json& list = pre.at("pretokenizers");
    // Qwen / Llama 3 style: Split(Regex, Isolated) then ByteLevel(use_regex = false).
    if (list.size() == 2 && list[0].value("type", "") == "Split" &&
        list[1].value("type", "") == "ByteLevel") {
      const json& split = list[0];
      if (!split.at("pattern").contains("Regex") || split.value("behavior", "") != "Isolated" ||
          split.value("invert", false))
        fail(ErrorKind::unsupported, name, "Split pre-tokenizer other than Isolated Regex");
      if (!byte_level_pattern(list[1], false).empty())
        fail(ErrorKind::unsupported, name, "Split followed by a regex ByteLevel");
      return split.at("pattern").at("Regex").get<std::string>();
    }
    if (list.size() == 1 && list[0].value("type", "") == "ByteLevel")
      return byte_level_pattern(list[0], true);
  }
  fail(ErrorKind::unsupported, name, "pre_tokenizer " + type + " is not supported");
}

std::pair<std::string, std::string> split_merge(const json& m, const std::string& name, size_t i) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
      fail(ErrorKind::invalid_argument, name, "merge " + std::to_string(i) + " is not \"a b\"");
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  fail(ErrorKind::invalid_argument, name, "merge " + std::to_string(i) + " is malformed");
}

// Fills config.vocab and config.merges from byte-to-unicode strings.
void add_vocab_and_merges(BpeConfig& config, const json& vocab, const json& merges,
                          const std::string& name) {
  if (!vocab.is_object()) fail(ErrorKind::invalid_argument, name, "vocab is not an object");
  std::unordered_map<std::string, int32_t> ids;  // vocab strings as written
  config.vocab.reserve(vocab.size());
  for (auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer())
      fail(ErrorKind::invalid_argument, name, "vocab id of " + token + " is not an integer");
    config.vocab.emplace_back(unicode_to_bytes(token, name), id.get<int32_t>());
    ids.emplace(token, id.get<int32_t>());
  }
  if (!merges.is_array()) fail(ErrorKind::invalid_argument, name, "merges is not an array");
  config.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [a, b] = split_merge(merges[i], name, i);
    auto ia = ids.find(a), ib = ids.find(b);
    if (ia == ids.end() || ib == ids.end())
      fail(ErrorKind::invalid_argument, name,
           "merge " + std::to_string(i) + " (" + a + " " + b + ") names a token not in vocab");
    config.merges.emplace_back(ia->second, ib->second);
  }
}

}  // namespace

char32_t byte_to_unicode(uint8_t byte) { return byte_table()[byte]; }

std::string bytes_to_unicode(std::string_view bytes) {
  std::string out;
  for (char ch : bytes) {
    const char32_t cp = byte_to_unicode(uint8_t(ch));
    if (cp < 0x80) {
      out += char(cp);
    } else {  // the table's code points are all below U+0800: two UTF-8 bytes
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

std::string unicode_to_bytes(std::string_view token, const std::string& name) {
  static const std::array<int16_t, 324> inverse = [] {
    std::array<int16_t, 324> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_table()[b]] = int16_t(b);
    return inv;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    int64_t cp = next_code_point(token, i);
    if (cp < 0 || cp >= int64_t(inverse.size()) || inverse[cp] < 0)
      fail(ErrorKind::invalid_argument, name,
           "token \"" + std::string(token) + "\" has a character that stands for no byte");
    out += char(inverse[cp]);
  }
  return out;
}

HfTokenizer load_hf_tokenizer_json(const std::string& path) {
  json j = parse_json(path);
  try {
    const json& model = j.at("model");
    if (model.value("type", "") != "BPE")
      fail(ErrorKind::unsupported, path, "model.type is not BPE");
    const json prefix = model.value("continuing_subword_prefix", json());
    if (prefix.is_string() && !prefix.get<std::string>().empty())
      fail(ErrorKind::unsupported, path, "continuing_subword_prefix is not supported");
    BpeConfig config;
    config.name = path;
    config.pattern = pre_tokenizer_pattern(j.at("pre_tokenizer"), path);
    config.ignore_merges = model.value("ignore_merges", false);
    add_vocab_and_merges(config, model.at("vocab"), model.at("merges"), path);
    std::vector<HfAddedToken> added;
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const json& t : j["added_tokens"]) {
        HfAddedToken a{t.at("content").get<std::string>(), t.at("id").get<int32_t>(),
                       t.value("special", false)};
        config.specials.emplace_back(a.content, a.id);
        added.push_back(std::move(a));
      }
    }
    return HfTokenizer{BpeTokenizer(std::move(config)), std::move(added)};
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_argument, path, std::string("malformed tokenizer.json: ") + e.what());
  }
}

BpeTokenizer load_hf_vocab_merges(const std::string& vocab_json_path,
                                  const std::string& merges_txt_path) {
  json vocab = parse_json(vocab_json_path);
  std::string text = read_file(merges_txt_path);
  json merges = json::array();
  std::istringstream lines(text);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && line.rfind("#version", 0) == 0) continue;
    first = false;
    if (line.empty()) continue;
    merges.push_back(line);
  }
  BpeConfig config;
  config.name = vocab_json_path;
  add_vocab_and_merges(config, vocab, merges, merges_txt_path);
  return BpeTokenizer(std::move(config));
}

BpeTokenizer bpe_from_ggml_vocab(std::span<const std::string> vocab, const std::string& name) {
  return BpeTokenizer::from_ranks(std::vector<std::string>(vocab.begin(), vocab.end()),
                                  std::string(kGpt2Pattern), name,
                                  /*allow_duplicate_tokens=*/true);
}

}  // namespace parley
