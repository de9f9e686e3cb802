// The chat tokenizer's pipeline: added-token matching, normalizers, pre-tokenizers, the BPE
// and SentencePiece models, post-processor template, decoder chain, and the stream decoder.
// Each step follows the Hugging Face tokenizers crate (normalizers/, pre_tokenizers/,
// models/bpe/, decoders/, added_vocabulary.rs) so that ids match it exactly.
#include "text/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <queue>

#include "engine/error.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer_spec.h"
#include "text/tokenizer_unicode.h"

namespace parley {
namespace {

using tok::AddedToken;
using tok::DecoderStep;
using tok::Model;
using tok::NormalizerStep;
using tok::PreTokenizerStep;
using tok::SplitBehavior;

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& problem) {
  throw Error(kind, "[tokenizer] " + name + ": " + problem);
}

// Decodes the code point at s[i] (valid UTF-8), advancing i.
char32_t next_code_point(std::string_view s, size_t& i) {
  utf8proc_int32_t cp = 0;
  utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + i,
                                        utf8proc_ssize_t(s.size() - i), &cp);
  if (n <= 0) {  // not reached for validated text; step one byte to make progress
    ++i;
    return 0xfffd;
  }
  i += size_t(n);
  return char32_t(cp);
}

// Rust's char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || c == 0x85 || c == 0xa0) return true;
  if (c < 0x1680) return false;
  return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c == '_') return true;
  auto cat = utf8proc_category(utf8proc_int32_t(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

char32_t last_code_point(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xc0) == 0x80) --i;
  if (i > 0) --i;
  return next_code_point(s, i);
}

char32_t first_code_point(std::string_view s) {
  size_t i = 0;
  return next_code_point(s, i);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  if (pos == 0) return;
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

// GPT-2's byte <-> printable character table (hf_tokenizer.h), inverted.
const std::array<int16_t, 324>& unicode_to_byte_table() {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_unicode(uint8_t(b))] = int16_t(b);
    return t;
  }();
  return table;
}

// A byte-level token's bytes, or false when one of its characters stands for no byte.
bool byte_level_bytes(std::string_view token, std::string& out) {
  const auto& table = unicode_to_byte_table();
  size_t start = out.size();
  for (size_t i = 0; i < token.size();) {
    char32_t c = next_code_point(token, i);
    if (c >= table.size() || table[c] < 0) {
      out.resize(start);
      return false;
    }
    out += char(table[c]);
  }
  return true;
}

// "<0xNN>" -> NN, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                     : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string byte_token_text(uint8_t b) {
  static const char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

// A pre-tokenized piece; at_start: it begins at offset 0 of the original text (Metaspace's
// prepend_scheme "first" prepends only there).
struct Piece {
  std::string text;
  bool at_start = false;
};

// The crate's NormalizedString::split for one piece, appending the kept parts to out.
void split_piece(const Piece& piece, const TokRegex& re, SplitBehavior behavior, bool invert,
                 std::vector<Piece>& out) {
  struct Part {
    size_t begin, end;
    bool match;
  };
  const std::string& s = piece.text;
  std::vector<Part> parts;
  size_t prev = 0;
  for (auto [b, e] : re.find_all(s)) {
    if (prev != b) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size()) parts.push_back({prev, s.size(), false});
  if (invert)
    for (Part& p : parts) p.match = !p.match;
  // (range, remove)
  std::vector<Part> kept;
  switch (behavior) {
    case SplitBehavior::isolated:
      for (Part p : parts) kept.push_back({p.begin, p.end, false});
      break;
    case SplitBehavior::removed: kept = parts; break;
    case SplitBehavior::contiguous: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.match == previous_match && !kept.empty())
          kept.back().end = p.end;
        else
          kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    }
    case SplitBehavior::merged_with_previous: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.match && !previous_match && !kept.empty())
          kept.back().end = p.end;
        else
          kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool previous_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !previous_match && !kept.empty())
          kept.back().begin = it->begin;
        else
          kept.push_back({it->begin, it->end, false});
        previous_match = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (const Part& p : kept) {
    if (p.match || p.begin == p.end) continue;  // `match` marks removal here
    out.push_back({s.substr(p.begin, p.end - p.begin), piece.at_start && p.begin == 0});
  }
}

// Finds added tokens in text, leftmost-longest (the crate's aho-corasick), with
// single_word, lstrip and rstrip applied.
class AddedMatcher {
 public:
  struct Match {
    size_t begin, end;
    int32_t id;
  };

  void add(std::string pattern, const AddedToken& token) {
    if (pattern.empty()) return;
    auto first = static_cast<unsigned char>(pattern[0]);
    entries_.push_back({std::move(pattern), &token});
    by_first_[first].push_back(entries_.size() - 1);
  }
  void finish() {
    for (auto& list : by_first_)
      std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
        return entries_[a].pattern.size() > entries_[b].pattern.size();
      });
  }
  bool empty() const { return entries_.empty(); }

  std::vector<Match> find(std::string_view s) const {
    std::vector<Match> out;
    size_t start_offset = 0;  // end of the last accepted match
    size_t pos = 0;
    while (pos < s.size()) {
      const Entry* hit = nullptr;
      for (size_t idx : by_first_[static_cast<unsigned char>(s[pos])]) {
        const Entry& e = entries_[idx];
        if (s.compare(pos, e.pattern.size(), e.pattern) == 0) {
          hit = &e;
          break;
        }
      }
      if (hit == nullptr) {
        ++pos;
        continue;
      }
      size_t begin = pos, end = pos + hit->pattern.size();
      pos = end;
      const AddedToken& t = *hit->token;
      if (t.single_word) {
        bool start_ok = begin == 0 || !is_word_char(last_code_point(s.substr(0, begin)));
        bool stop_ok = end == s.size() || !is_word_char(first_code_point(s.substr(end)));
        if (!start_ok || !stop_ok) continue;
      }
      if (t.lstrip) {
        size_t b = begin;
        while (b > start_offset) {
          size_t p = b - 1;
          while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xc0) == 0x80) --p;
          size_t q = p;
          if (!is_whitespace(next_code_point(s, q))) break;
          b = p;
        }
        begin = std::max(b, start_offset);
      }
      if (t.rstrip) {
        while (end < s.size()) {
          size_t q = end;
          if (!is_whitespace(next_code_point(s, q))) break;
          end = q;
        }
        pos = std::max(pos, end);
      }
      out.push_back({begin, end, t.id});
      start_offset = end;
    }
    return out;
  }

 private:
  struct Entry {
    std::string pattern;
    const AddedToken* token;
  };
  std::vector<Entry> entries_;
  std::array<std::vector<size_t>, 256> by_first_;
};

using PieceCache =
    std::unordered_map<std::string, std::vector<int32_t>, tok::StringHash, std::equal_to<>>;

}  // namespace

struct Tokenizer::Impl {
  tok::TokenizerSpec spec;
  std::vector<std::string> texts;  // id -> token text (model token or added content)
  std::vector<uint8_t> present;    // 1: model token, 2: added, 3: special added
  tok::StringIdMap added_ids;      // added content -> id
  AddedMatcher raw_matcher;        // normalized = false: matched before normalizing
  AddedMatcher normalized_matcher;
  std::array<int32_t, 256> byte_ids;  // <0xNN> ids (byte_fallback, spm), -1 if none
  bool decoder_byte_level = false, decoder_byte_fallback = false;

  explicit Impl(tok::TokenizerSpec s);
  std::string normalize(std::string_view s) const;
  void pre_tokenize(Piece piece, std::vector<Piece>& out) const;
  void encode_piece(std::string_view piece, PieceCache& cache, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view word, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view word, std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, bool at_start, PieceCache& cache,
                   std::vector<int32_t>& out) const;
  std::vector<std::string> run_decoder(std::vector<std::string> tokens) const;
  const std::string& text_of(int32_t id) const;
};

Tokenizer::Impl::Impl(tok::TokenizerSpec s) : spec(std::move(s)) {
  const std::string& name = spec.name;
  Model& m = spec.model;
  texts = m.id_to_token;
  present.assign(texts.size(), 0);
  for (size_t i = 0; i < texts.size(); ++i) present[i] = m.vocab.count(texts[i]) ? 1 : 0;
  for (const AddedToken& t : spec.added_tokens) {
    if (t.id < 0) fail(ErrorKind::invalid_argument, name, "added token with a negative id");
    if (t.content.empty())
      fail(ErrorKind::invalid_argument, name, "empty added token " + std::to_string(t.id));
    if (size_t(t.id) >= texts.size()) {
      texts.resize(t.id + 1);
      present.resize(t.id + 1, 0);
    }
    texts[t.id] = t.content;
    present[t.id] = t.special ? 3 : 2;
    added_ids[t.content] = t.id;
  }
  for (const AddedToken& t : spec.added_tokens) {
    if (t.normalized)
      normalized_matcher.add(normalize(t.content), t);
    else
      raw_matcher.add(t.content, t);
  }
  raw_matcher.finish();
  normalized_matcher.finish();
  byte_ids.fill(-1);
  for (int b = 0; b < 256; ++b) {
    auto it = m.vocab.find(byte_token_text(uint8_t(b)));
    if (it != m.vocab.end()) byte_ids[b] = it->second;
  }
  for (const DecoderStep& d : spec.decoder) {
    if (d.kind == DecoderStep::Kind::byte_level) decoder_byte_level = true;
    if (d.kind == DecoderStep::Kind::byte_fallback) decoder_byte_fallback = true;
  }
  auto check_id = [&](int32_t id, const char* what) {
    if (id >= 0 && (size_t(id) >= present.size() || !present[id]))
      fail(ErrorKind::invalid_argument, name,
           std::string(what) + " id " + std::to_string(id) + " is not a token");
  };
  check_id(spec.bos_id, "bos");
  check_id(spec.eos_id, "eos");
  for (int32_t id : spec.eos_ids) check_id(id, "eos");
  for (const auto& piece : spec.template_single)
    for (int32_t id : piece.ids) check_id(id, "post-processor");
}

const std::string& Tokenizer::Impl::text_of(int32_t id) const {
  if (id < 0 || size_t(id) >= present.size() || !present[id])
    fail(ErrorKind::invalid_argument, spec.name, "unknown token id " + std::to_string(id));
  return texts[id];
}

std::string Tokenizer::Impl::normalize(std::string_view s) const {
  std::string out(s);
  for (const NormalizerStep& n : spec.normalizer) {
    if (out.empty()) break;
    switch (n.kind) {
      case NormalizerStep::Kind::nfc: out = unicode_normalize(out, NormalForm::nfc); break;
      case NormalizerStep::Kind::nfd: out = unicode_normalize(out, NormalForm::nfd); break;
      case NormalizerStep::Kind::nfkc: out = unicode_normalize(out, NormalForm::nfkc); break;
      case NormalizerStep::Kind::nfkd: out = unicode_normalize(out, NormalForm::nfkd); break;
      case NormalizerStep::Kind::lowercase: out = unicode_lowercase(out); break;
      case NormalizerStep::Kind::strip_accents: out = unicode_strip_marks(out); break;
      case NormalizerStep::Kind::prepend: out = n.content + out; break;
      case NormalizerStep::Kind::replace: {
        std::string r;
        size_t prev = 0;
        for (auto [b, e] : n.pattern->find_all(out)) {
          r.append(out, prev, b - prev);
          r.append(n.content);
          prev = e;
        }
        r.append(out, prev, std::string::npos);
        out = std::move(r);
        break;
      }
      case NormalizerStep::Kind::strip: {
        size_t b = 0, e = out.size();
        if (n.left)
          while (b < e) {
            size_t q = b;
            if (!is_whitespace(next_code_point(out, q))) break;
            b = q;
          }
        if (n.right)
          while (e > b) {
            size_t p = e - 1;
            while (p > b && (static_cast<unsigned char>(out[p]) & 0xc0) == 0x80) --p;
            size_t q = p;
            if (!is_whitespace(next_code_point(out, q))) break;
            e = p;
          }
        out = out.substr(b, e - b);
        break;
      }
    }
  }
  return out;
}

void Tokenizer::Impl::pre_tokenize(Piece piece, std::vector<Piece>& out) const {
  std::vector<Piece> pieces{std::move(piece)}, next;
  for (const PreTokenizerStep& step : spec.pre_tokenizer) {
    next.clear();
    for (Piece& p : pieces) {
      switch (step.kind) {
        case PreTokenizerStep::Kind::split:
          split_piece(p, *step.pattern, step.behavior, step.invert, next);
          break;
        case PreTokenizerStep::Kind::byte_level: {
          if (step.add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text = " " + p.text;
          size_t first = next.size();
          if (step.pattern)
            split_piece(p, *step.pattern, SplitBehavior::isolated, false, next);
          else if (!p.text.empty())
            next.push_back(std::move(p));
          for (size_t i = first; i < next.size(); ++i)
            next[i].text = bytes_to_unicode(next[i].text);
          break;
        }
        case PreTokenizerStep::Kind::metaspace: {
          replace_all(p.text, " ", step.replacement);
          bool starts = p.text.compare(0, step.replacement.size(), step.replacement) == 0;
          if (!starts && (step.prepend_scheme == tok::PrependScheme::always ||
                          (step.prepend_scheme == tok::PrependScheme::first && p.at_start)))
            p.text = step.replacement + p.text;
          if (step.split) {  // step.pattern: the replacement, literally
            split_piece(p, *step.pattern, SplitBehavior::merged_with_next, false, next);
          } else if (!p.text.empty()) {
            next.push_back(std::move(p));
          }
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (Piece& p : pieces)
    if (!p.text.empty()) out.push_back(std::move(p));
}

void Tokenizer::Impl::encode_bpe(std::string_view word, std::vector<int32_t>& out) const {
  const Model& m = spec.model;
  struct Sym {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id) {
    int32_t idx = int32_t(syms.size());
    syms.push_back({id, idx - 1, -1, true});
    if (idx > 0) syms[idx - 1].next = idx;
  };
  // The crate's Word building: a pending unknown run is emitted before the next known
  // character (fused when fuse_unk).
  int32_t pending_unk = -1;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    next_code_point(word, i);
    std::string_view ch = word.substr(start, i - start);
    auto it = m.vocab.find(ch);
    if (it != m.vocab.end()) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(it->second);
      continue;
    }
    if (m.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : ch) add(byte_ids[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (m.unk_id >= 0) {
      if (pending_unk >= 0 && !m.fuse_unk) add(pending_unk);
      pending_unk = m.unk_id;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (syms.empty()) return;

  struct Cand {
    int32_t rank;
    int32_t pos;
    int32_t merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto pair_of = [&](int32_t pos) -> const std::pair<int32_t, int32_t>* {
    if (pos < 0 || syms[pos].next < 0) return nullptr;
    uint64_t key = uint64_t(uint32_t(syms[pos].id)) << 32 | uint32_t(syms[syms[pos].next].id);
    auto it = m.merges.find(key);
    return it == m.merges.end() ? nullptr : &it->second;
  };
  auto push = [&](int32_t pos) {
    if (auto* p = pair_of(pos)) heap.push({p->first, pos, p->second});
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& a = syms[c.pos];
    if (!a.alive || a.next < 0) continue;
    auto* p = pair_of(c.pos);
    if (p == nullptr || p->second != c.merged || p->first != c.rank) continue;  // stale
    Sym& b = syms[a.next];
    b.alive = false;
    a.id = c.merged;
    a.next = b.next;
    if (b.next >= 0) syms[b.next].prev = c.pos;
    push(a.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

void Tokenizer::Impl::encode_spm(std::string_view word, std::vector<int32_t>& out) const {
  const Model& m = spec.model;
  struct Sym {
    uint32_t start, len;
    int32_t prev, next;
  };
  std::vector<Sym> syms;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    next_code_point(word, i);
    int32_t idx = int32_t(syms.size());
    syms.push_back({uint32_t(start), uint32_t(i - start), idx - 1, -1});
    if (idx > 0) syms[idx - 1].next = idx;
  }
  struct Cand {
    float score;
    int32_t left, right;
    uint32_t len;
    // Highest score first, then leftmost (llama.cpp's llm_bigram_spm comparator).
    bool operator<(const Cand& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Cand> heap;
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t len = syms[l].len + syms[r].len;
    auto it = m.vocab.find(word.substr(syms[l].start, len));
    if (it == m.vocab.end() || !m.mergeable[it->second]) return;
    heap.push({m.scores[it->second], l, r, len});
  };
  for (int32_t i = 1; i < int32_t(syms.size()); ++i) try_pair(i - 1, i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& l = syms[c.left];
    Sym& r = syms[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    std::string_view text = word.substr(syms[i].start, syms[i].len);
    auto it = m.vocab.find(text);
    if (it != m.vocab.end()) {
      out.push_back(it->second);
      continue;
    }
    for (char c : text) {
      int32_t id = byte_ids[static_cast<unsigned char>(c)];
      if (id < 0) id = m.unk_id;
      if (id >= 0) out.push_back(id);
    }
  }
}

void Tokenizer::Impl::encode_piece(std::string_view piece, PieceCache& cache,
                                   std::vector<int32_t>& out) const {
  const Model& m = spec.model;
  bool whole = m.ignore_merges ||
               (m.whole_newline_runs && piece.find_first_not_of('\n') == std::string_view::npos);
  if (whole) {
    auto it = m.vocab.find(piece);
    if (it != m.vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  auto hit = cache.find(piece);
  if (hit != cache.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  size_t first = out.size();
  if (m.kind == Model::Kind::bpe)
    encode_bpe(piece, out);
  else
    encode_spm(piece, out);
  if (piece.size() <= 256)
    cache.emplace(std::string(piece), std::vector(out.begin() + first, out.end()));
}

void Tokenizer::Impl::encode_text(std::string_view text, bool at_start, PieceCache& cache,
                                  std::vector<int32_t>& out) const {
  std::string normalized = normalize(text);
  std::vector<Piece> words;
  auto pre = [&](size_t b, size_t e) {
    if (e > b) pre_tokenize({normalized.substr(b, e - b), at_start && b == 0}, words);
  };
  size_t prev = 0;
  for (const auto& match : normalized_matcher.find(normalized)) {
    pre(prev, match.begin);
    for (const Piece& w : words) encode_piece(w.text, cache, out);
    words.clear();
    out.push_back(match.id);
    prev = match.end;
  }
  pre(prev, normalized.size());
  for (const Piece& w : words) encode_piece(w.text, cache, out);
}

std::vector<std::string> Tokenizer::Impl::run_decoder(std::vector<std::string> tokens) const {
  for (const DecoderStep& d : spec.decoder) {
    switch (d.kind) {
      case DecoderStep::Kind::byte_level: {
        std::string bytes;
        for (const std::string& t : tokens)
          if (!byte_level_bytes(t, bytes)) bytes += t;
        std::string text;
        append_utf8_lossy(bytes, text);
        tokens.assign(1, std::move(text));
        break;
      }
      case DecoderStep::Kind::replace:
        for (std::string& t : tokens) replace_all(t, d.pattern, d.content);
        break;
      case DecoderStep::Kind::byte_fallback: {
        std::vector<std::string> next;
        std::string pending;
        auto flush = [&] {
          if (pending.empty()) return;
          if (utf8_invalid_offset(pending) == std::string::npos) {
            next.push_back(pending);
          } else {
            for (size_t i = 0; i < pending.size(); ++i) next.emplace_back(kReplacementChar);
          }
          pending.clear();
        };
        for (std::string& t : tokens) {
          int b = parse_byte_token(t);
          if (b >= 0) {
            pending += char(b);
            continue;
          }
          flush();
          next.push_back(std::move(t));
        }
        flush();
        tokens = std::move(next);
        break;
      }
      case DecoderStep::Kind::fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecoderStep::Kind::strip:
        for (std::string& t : tokens) {
          size_t b = 0, e = t.size();
          for (int k = 0; k < d.start && t.compare(b, d.content.size(), d.content) == 0; ++k)
            b += d.content.size();
          for (int k = 0; k < d.stop && e >= b + d.content.size() &&
                          t.compare(e - d.content.size(), d.content.size(), d.content) == 0;
               ++k)
            e -= d.content.size();
          t = t.substr(b, e - b);
        }
        break;
      case DecoderStep::Kind::metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          bool drop = i == 0 && d.prepend_scheme != tok::PrependScheme::never;
          replace_all(tokens[i], d.replacement, drop ? "" : " ");
        }
        break;
    }
  }
  return tokens;
}

Tokenizer::Tokenizer(tok::TokenizerSpec spec) : impl_(std::make_shared<Impl>(std::move(spec))) {}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  size_t bad = utf8_invalid_offset(text);
  if (bad != std::string_view::npos)
    fail(ErrorKind::invalid_argument, m.spec.name,
         "text to encode is not valid UTF-8 at byte " + std::to_string(bad));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  PieceCache cache;
  size_t prev = 0;
  for (const auto& match : m.raw_matcher.find(text)) {
    if (match.begin > prev)
      m.encode_text(text.substr(prev, match.begin - prev), prev == 0, cache, ids);
    ids.push_back(match.id);
    prev = match.end;
  }
  if (text.size() > prev) m.encode_text(text.substr(prev), prev == 0, cache, ids);
  if (!add_special_tokens || m.spec.template_single.empty()) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (const auto& piece : m.spec.template_single) {
    if (piece.sequence)
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), piece.ids.begin(), piece.ids.end());
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string& t = m.text_of(id);
    if (skip_special_tokens && m.present[id] == 3) continue;
    tokens.push_back(t);
  }
  std::string out;
  if (!m.spec.has_decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const std::string& t : m.run_decoder(std::move(tokens))) out += t;
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const Impl& m = *impl_;
  std::string t = m.text_of(id);
  if (m.present[id] >= 2) return t;
  for (const DecoderStep& d : m.spec.decoder) {
    switch (d.kind) {
      case DecoderStep::Kind::byte_level: {
        std::string bytes;
        if (byte_level_bytes(t, bytes)) t = std::move(bytes);
        break;
      }
      case DecoderStep::Kind::replace: replace_all(t, d.pattern, d.content); break;
      case DecoderStep::Kind::byte_fallback: {
        int b = parse_byte_token(t);
        if (b >= 0) t = std::string(1, char(b));
        break;
      }
      case DecoderStep::Kind::metaspace: replace_all(t, d.replacement, " "); break;
      case DecoderStep::Kind::fuse:
      case DecoderStep::Kind::strip: break;
    }
  }
  return t;
}

int32_t Tokenizer::bos_id() const { return impl_->spec.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->spec.eos_id; }
std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->spec.eos_ids; }
int32_t Tokenizer::vocab_size() const { return int32_t(impl_->present.size()); }
const std::string& Tokenizer::name() const { return impl_->spec.name; }

int32_t Tokenizer::token_id(std::string_view token) const {
  auto a = impl_->added_ids.find(token);
  if (a != impl_->added_ids.end()) return a->second;
  auto it = impl_->spec.model.vocab.find(token);
  return it == impl_->spec.model.vocab.end() ? -1 : it->second;
}

const std::string& Tokenizer::token_text(int32_t id) const { return impl_->text_of(id); }

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->present.size() && impl_->present[id] != 0;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->present.size() && impl_->present[id] == 3;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  tokenizer_.token_text(id);  // throws for an unknown id before any state changes
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  // Decode a short window: the tokens already returned (context for decoders that treat
  // the first token specially or merge bytes) and the new ones.
  std::string before = tokenizer_.decode(all.subspan(prefix_, read_ - prefix_));
  std::string now = tokenizer_.decode(all.subspan(prefix_));
  // A trailing U+FFFD may be a character the next token completes: hold it back.
  if (now.size() <= before.size() || now.ends_with(kReplacementChar) ||
      now.compare(0, before.size(), before) != 0)
    return {};
  prefix_ = read_;
  read_ = ids_.size();
  if (prefix_ > 4096) {  // keep the window's storage bounded
    ids_.erase(ids_.begin(), ids_.begin() + std::ptrdiff_t(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  return now.substr(before.size());
}

std::string StreamDecoder::flush() {
  std::span<const int32_t> all(ids_);
  std::string before = tokenizer_.decode(all.subspan(prefix_, read_ - prefix_));
  std::string now = tokenizer_.decode(all.subspan(prefix_));
  ids_.clear();
  prefix_ = read_ = 0;
  if (now.size() <= before.size() || now.compare(0, before.size(), before) != 0) return {};
  return now.substr(before.size());
}

}  // namespace parley
