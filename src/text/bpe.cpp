// Byte-level BPE: PCRE2 pre-tokenization and the lowest-rank-first merge loop.
#include "text/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <queue>

#include "engine/error.h"

namespace parley {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw Error(ErrorKind::invalid_argument, "[tokenizer] " + name + ": " + problem);
}

// A compiled PCRE2 pattern; the match data and JIT stack are made per call so that one
// tokenizer can encode from many threads.
class Regex {
 public:
  Regex() = default;
  Regex(const std::string& pattern, uint32_t options, const std::string& name) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                          &err, &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      fail(name, "pre-tokenizer regex does not compile at offset " + std::to_string(offset) + ": " +
                     reinterpret_cast<const char*>(msg));
    }
    // Without JIT support pcre2_match falls back to the interpreter; same results.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  Regex(Regex&& other) noexcept : code_(std::exchange(other.code_, nullptr)) {}
  Regex& operator=(Regex&& other) noexcept {
    std::swap(code_, other.code_);
    return *this;
  }
  ~Regex() { pcre2_code_free(code_); }
  bool empty() const { return code_ == nullptr; }

  // Calls on_gap(begin, end) for text no match covers and on_match(begin, end) for each
  // match, in order, covering all of text.
  template <typename Gap, typename Match>
  void split(std::string_view text, const std::string& name, Gap&& on_gap, Match&& on_match) const {
    // The JIT's default 32 KiB stack is too small for \s+(?!\S) on long whitespace runs.
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
    std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> mctx(
        pcre2_match_context_create(nullptr), &pcre2_match_context_free);
    std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> stack(
        pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr), &pcre2_jit_stack_free);
    pcre2_jit_stack_assign(mctx.get(), nullptr, stack.get());
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t covered = 0;  // text[0, covered) has been reported
    size_t from = 0;
    while (from < text.size()) {
      int rc = pcre2_match(code_, subject, text.size(), from, 0, md.get(), mctx.get());
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof(msg));
        throw Error(ErrorKind::internal, "[tokenizer] " + name + ": regex match failed: " +
                                             reinterpret_cast<const char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      size_t begin = ov[0], end = ov[1];
      if (end == begin) {  // empty match: step over one byte, left to the gap
        from = end + 1;
        continue;
      }
      if (begin > covered) on_gap(covered, begin);
      on_match(begin, end);
      covered = from = end;
    }
    if (covered < text.size()) on_gap(covered, text.size());
  }

 private:
  pcre2_code* code_ = nullptr;
};

}  // namespace

std::string regex_literal(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

struct BpeTokenizer::Impl {
  std::string name;
  TokenMap encoder;  // token bytes -> id
  TokenMap special_encoder;
  std::vector<std::string> bytes_by_id;  // tokens and specials
  std::vector<uint8_t> present;          // bytes_by_id[id] is a token
  // (left id << 32 | right id) -> (merge priority, merged id); empty in rank mode.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::vector<int32_t> byte_ids;  // merges mode: id of each single byte, -1 if none
  bool ignore_merges = false;
  Regex pattern;
  Regex specials;

  void add_id(int32_t id, const std::string& bytes, const char* what) {
    if (id < 0) fail(name, std::string(what) + " id " + std::to_string(id) + " is negative");
    if (static_cast<size_t>(id) >= bytes_by_id.size()) {
      bytes_by_id.resize(id + 1);
      present.resize(id + 1, 0);
    }
    if (present[id]) fail(name, "duplicate id " + std::to_string(id));
    present[id] = 1;
    bytes_by_id[id] = bytes;
  }

  // Merges piece (no direct hit) into ids appended to out.
  void merge_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
};

void BpeTokenizer::Impl::merge_piece(std::string_view piece, std::vector<int32_t>& out) const {
  // Doubly linked parts over piece; a heap of candidate pairs keyed (rank, start) gives
  // tiktoken's "lowest rank, leftmost first" order in O(n log n) for long pieces.
  struct Part {
    uint32_t start, end;
    int32_t prev, next;
    int32_t id;
    bool alive;
  };
  struct Cand {
    int32_t rank;
    uint32_t start, end;  // span of the merged pair
    int32_t left;
    int32_t merged_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
  };
  const bool rank_mode = merges.empty();
  const size_t n = piece.size();
  std::vector<Part> parts(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t id = -1;
    if (!rank_mode) {
      id = byte_ids[static_cast<unsigned char>(piece[i])];
      if (id < 0) fail(name, "no token for byte " + std::to_string(uint8_t(piece[i])));
    }
    parts[i] = {uint32_t(i), uint32_t(i + 1), int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1, id,
                true};
  }
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto push_pair = [&](int32_t left) {
    if (left < 0 || parts[left].next < 0) return;
    const Part& a = parts[left];
    const Part& b = parts[a.next];
    if (rank_mode) {
      auto it = encoder.find(piece.substr(a.start, b.end - a.start));
      if (it != encoder.end()) heap.push({it->second, a.start, b.end, left, it->second});
    } else {
      auto it = merges.find(uint64_t(uint32_t(a.id)) << 32 | uint32_t(b.id));
      if (it != merges.end())
        heap.push({it->second.first, a.start, b.end, left, it->second.second});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push_pair(int32_t(i));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Part& a = parts[c.left];
    // Stale unless the pair still spans [start, end); parts only grow, so the split
    // point is then the same as when the candidate was pushed.
    if (!a.alive || a.start != c.start || a.next < 0 || parts[a.next].end != c.end) continue;
    Part& b = parts[a.next];
    b.alive = false;
    a.end = b.end;
    a.next = b.next;
    a.id = c.merged_id;
    if (b.next >= 0) parts[b.next].prev = c.left;
    push_pair(a.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = parts[i].next) {
    const Part& p = parts[i];
    if (rank_mode) {
      auto it = encoder.find(piece.substr(p.start, p.end - p.start));
      if (it == encoder.end())
        fail(name, "no token for byte " + std::to_string(uint8_t(piece[p.start])));
      out.push_back(it->second);
    } else {
      out.push_back(p.id);
    }
  }
}

void BpeTokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  // Pieces that need merging repeat a lot in long texts (words); cache them per call.
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
  std::vector<int32_t> ids;
  auto encode_piece = [&](size_t begin, size_t end) {
    std::string_view piece = text.substr(begin, end - begin);
    if (merges.empty() || ignore_merges) {
      auto it = encoder.find(piece);
      if (it != encoder.end()) {
        out.push_back(it->second);
        return;
      }
    }
    auto hit = cache.find(piece);
    if (hit != cache.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
    ids.clear();
    merge_piece(piece, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (piece.size() <= 256) cache.emplace(std::string(piece), ids);
  };
  if (pattern.empty()) {
    if (!text.empty()) encode_piece(0, text.size());
    return;
  }
  // Text the regex skips (only invalid UTF-8 can be skipped) is still encoded, bytewise.
  pattern.split(text, name, encode_piece, encode_piece);
}

BpeTokenizer::BpeTokenizer(BpeConfig config) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.name = std::move(config.name);
  m.ignore_merges = config.ignore_merges;
  m.encoder.reserve(config.vocab.size());
  for (auto& [bytes, id] : config.vocab) {
    // An empty token (multilingual.tiktoken's rank 50256) only reserves its id.
    if (!bytes.empty() && !m.encoder.emplace(bytes, id).second) {
      if (!config.allow_duplicate_tokens)
        fail(m.name, "duplicate token for id " + std::to_string(id));
      auto it = m.encoder.find(bytes);
      it->second = std::min(it->second, id);
    }
    m.add_id(id, bytes, "token");
  }
  for (auto& [text, id] : config.specials) {
    if (text.empty()) fail(m.name, "empty special token for id " + std::to_string(id));
    if (!m.special_encoder.emplace(text, id).second) fail(m.name, "duplicate special " + text);
    // A special may also be a vocab entry of the same id (Hugging Face lists both).
    if (size_t(id) < m.present.size() && m.present[id] && m.bytes_by_id[id] == text) continue;
    m.add_id(id, text, "special");
  }
  if (!config.merges.empty()) {
    m.byte_ids.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      auto it = m.encoder.find(std::string(1, char(b)));
      if (it != m.encoder.end()) m.byte_ids[b] = it->second;
    }
    m.merges.reserve(config.merges.size());
    for (size_t i = 0; i < config.merges.size(); ++i) {
      auto [l, r] = config.merges[i];
      auto known = [&](int32_t id) {
        return id >= 0 && size_t(id) < m.present.size() && m.present[id];
      };
      if (!known(l) || !known(r)) fail(m.name, "merge " + std::to_string(i) + " of unknown id");
      auto it = m.encoder.find(m.bytes_by_id[l] + m.bytes_by_id[r]);
      if (it == m.encoder.end())
        fail(m.name, "merge " + std::to_string(i) + " makes a token that is not in the vocab");
      // Keep the first (highest priority) entry of a repeated merge, as HF does.
      m.merges.emplace(uint64_t(uint32_t(l)) << 32 | uint32_t(r),
                       std::pair{int32_t(i), it->second});
    }
  }
  if (!config.pattern.empty())
    m.pattern = Regex(config.pattern, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, m.name);
  if (!m.special_encoder.empty()) {
    std::vector<std::string_view> texts;
    for (auto& [text, id] : m.special_encoder) texts.push_back(text);
    // Longest first, so a special that is a prefix of another does not win.
    std::sort(texts.begin(), texts.end(),
              [](auto a, auto b) { return a.size() != b.size() ? a.size() > b.size() : a < b; });
    std::string alt;
    for (auto t : texts) alt += (alt.empty() ? "" : "|") + regex_literal(t);
    m.specials = Regex(alt, 0, m.name);
  }
}

BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;

BpeTokenizer BpeTokenizer::from_ranks(std::vector<std::string> tokens_by_rank, std::string pattern,
                                      std::string name, bool allow_duplicate_tokens) {
  BpeConfig config;
  config.allow_duplicate_tokens = allow_duplicate_tokens;
  config.vocab.reserve(tokens_by_rank.size());
  for (size_t r = 0; r < tokens_by_rank.size(); ++r)
    config.vocab.emplace_back(std::move(tokens_by_rank[r]), int32_t(r));
  config.pattern = std::move(pattern);
  config.name = std::move(name);
  return BpeTokenizer(std::move(config));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  impl_->encode_ordinary(text, out);
  return out;
}

std::vector<int32_t> BpeTokenizer::encode_with_specials(std::string_view text) const {
  if (impl_->specials.empty()) return encode(text);
  std::vector<int32_t> out;
  impl_->specials.split(
      text, impl_->name,
      [&](size_t b, size_t e) { impl_->encode_ordinary(text.substr(b, e - b), out); },
      [&](size_t b, size_t e) { out.push_back(special_id(text.substr(b, e - b))); });
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

bool BpeTokenizer::has_id(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->present.size() && impl_->present[id];
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  if (!has_id(id)) fail(impl_->name, "unknown token id " + std::to_string(id));
  return impl_->bytes_by_id[id];
}

int32_t BpeTokenizer::token_id(std::string_view bytes) const {
  auto it = impl_->encoder.find(bytes);
  return it == impl_->encoder.end() ? special_id(bytes) : it->second;
}

int32_t BpeTokenizer::special_id(std::string_view text) const {
  auto it = impl_->special_encoder.find(text);
  return it == impl_->special_encoder.end() ? -1 : it->second;
}

int32_t BpeTokenizer::id_end() const { return int32_t(impl_->bytes_by_id.size()); }
const std::string& BpeTokenizer::name() const { return impl_->name; }

}  // namespace parley
