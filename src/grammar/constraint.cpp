#include "grammar/constraint.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <tuple>

#include "engine/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace parley {

namespace {

bool is_space(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

// Masks kept per constraint before the cache starts over (each is vocab/8 bytes: 19 KB for a
// 151k vocabulary).
constexpr size_t kMaxCachedMasks = 4096;
// The longest text-slice token in characters: longer ones (690 of Qwen3's, runs of '=' and
// the like) are walked, so the chain of states a mask follows stays short.
constexpr size_t kMaxSliceChars = 16;
// Characters that may lead elsewhere than the others before a mask walks the whole trie.
constexpr int kMaxExceptions = 40;
// Token ids a TokenTrie::Memo holds before it starts over (16 MB).
constexpr size_t kMaxMemoIds = size_t(4) << 20;

}  // namespace

std::shared_ptr<ByteAutomaton> compile_grammar(const GrammarSpec& spec) {
  switch (spec.kind) {
    case GrammarSpec::Kind::regex: return Regex::compile(spec.text);
    case GrammarSpec::Kind::gbnf: return Grammar::compile_gbnf(spec.text, "grammar", spec.start);
    case GrammarSpec::Kind::json_schema:
      return Grammar::compile_gbnf(json_schema_to_gbnf(spec.text), "json_schema");
    case GrammarSpec::Kind::json_object:
      return Grammar::compile_gbnf(json_object_gbnf(), "json_object");
    case GrammarSpec::Kind::none: break;
  }
  throw Error(ErrorKind::invalid_argument, "[grammar] no grammar to compile");
}

namespace {

// The number of characters of `b` when it is whole UTF-8 characters, none of them '"', '\\',
// a control character or DEL; else 0.
size_t text_slice_chars(std::string_view b) {
  size_t chars = 0;
  for (size_t i = 0; i < b.size();) {
    const uint8_t c = uint8_t(b[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == '"' || c == '\\' || c == 0x7F) return 0;
      ++i;
      ++chars;
      continue;
    }
    const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || c > 0xF4 || (c & 0xFE) == 0xC0 || i + size_t(n) > b.size()) return 0;
    uint32_t cp = c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const uint8_t x = uint8_t(b[i + size_t(k)]);
      if ((x & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (x & 0x3F);
    }
    if (cp < (n == 2   ? 0x80u
              : n == 3 ? 0x800u
                       : 0x10000u) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    i += size_t(n);
    ++chars;
  }
  return chars;
}

}  // namespace

void TokenTrie::Trie::build(const std::vector<std::string>& b, std::vector<int32_t> order) {
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return b[size_t(x)] != b[size_t(y)] ? b[size_t(x)] < b[size_t(y)] : x < y;
  });
  // Sorted, each token's path shares the longest prefix with the previous token's; its id
  // goes to the deepest node (just made, or shared with an equal previous token).
  std::string_view prev;
  for (int32_t id : order) {
    const std::string& s = b[size_t(id)];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    for (size_t d = common; d < s.size(); ++d) {
      byte.push_back(uint8_t(s[d]));
      depth.push_back(int32_t(d + 1));
      first.push_back(int32_t(ids.size()));
    }
    ids.push_back(id);
    max_depth = std::max(max_depth, s.size());
    prev = s;
  }
  first.push_back(int32_t(ids.size()));
  // The node after k's subtree is the next node not deeper than k.
  const int32_t n = int32_t(byte.size());
  skip.assign(size_t(n), n);
  std::vector<int32_t> open;
  for (int32_t k = 0; k < n; ++k) {
    while (!open.empty() && depth[size_t(open.back())] >= depth[size_t(k)]) {
      skip[size_t(open.back())] = k;
      open.pop_back();
    }
    open.push_back(k);
  }
}

template <class Emit>
void TokenTrie::Trie::walk_range(ByteAutomaton& a, int32_t begin, int32_t end, int32_t s,
                                 Emit emit) const {
  if (begin >= end) return;
  // The state and its transition table per depth along the current path.
  const size_t d0 = size_t(depth[size_t(begin)]);
  // Scratch kept per thread: a mask walks up to 256 ranges (walk_first, the subtree memo),
  // and every entry is written before it is read.
  static thread_local std::vector<int32_t> at;
  static thread_local std::vector<const int32_t*> table;
  at.resize(max_depth + 1);
  table.resize(max_depth + 1);
  at[d0 - 1] = s;
  table[d0 - 1] = a.transitions(s);
  for (int32_t k = begin; k < end;) {
    const size_t d = size_t(depth[size_t(k)]);
    int32_t t = table[d - 1][byte[size_t(k)]];
    if (t == ByteAutomaton::kUnknown) t = a.step(at[d - 1], byte[size_t(k)]);
    if (t == ByteAutomaton::kDead) {
      k = skip[size_t(k)];
      continue;
    }
    at[d] = t;
    if (d < max_depth && k + 1 < end && size_t(depth[size_t(k) + 1]) > d)
      table[d] = a.transitions(t);  // only when a child follows
    for (int32_t i = first[size_t(k)]; i < first[size_t(k) + 1]; ++i) emit(ids[size_t(i)]);
    ++k;
  }
}

void TokenTrie::Trie::walk(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits,
                           Memo* memo) const {
  const auto set = [&](int32_t id) { bits[size_t(id) / 32] |= 1u << (id % 32); };
  const int32_t n = int32_t(byte.size());
  if (!memo) {
    walk_range(a, 0, n, s, set);
    return;
  }
  if (memo->ids > kMaxMemoIds) {
    memo->subtrees.clear();
    memo->ids = 0;
  }
  const int32_t* table = a.transitions(s);
  for (int32_t k = 0; k < n; k = skip[size_t(k)]) {  // the first-byte nodes
    int32_t t = table[byte[size_t(k)]];
    if (t == ByteAutomaton::kUnknown) {
      t = a.step(s, byte[size_t(k)]);
      table = a.transitions(s);
    }
    if (t == ByteAutomaton::kDead) continue;
    const uint64_t key = (uint64_t(uint32_t(k)) << 32) | uint32_t(t);
    auto it = memo->subtrees.find(key);
    if (it == memo->subtrees.end()) {
      std::vector<int32_t> found(ids.begin() + first[size_t(k)],
                                 ids.begin() + first[size_t(k) + 1]);
      walk_range(a, k + 1, skip[size_t(k)], t, [&](int32_t id) { found.push_back(id); });
      memo->ids += found.size();
      it = memo->subtrees.emplace(key, std::move(found)).first;
    }
    for (int32_t id : it->second) set(id);
  }
}

void TokenTrie::Trie::walk_first(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits,
                                 const std::array<bool, 256>& first, bool want) const {
  const auto set = [&](int32_t id) { bits[size_t(id) / 32] |= 1u << (id % 32); };
  const int32_t n = int32_t(byte.size());
  for (int32_t k = 0; k < n; k = skip[size_t(k)])  // the first-byte nodes
    if (first[byte[size_t(k)]] == want) walk_range(a, k, skip[size_t(k)], s, set);
}

TokenTrie::TokenTrie(std::shared_ptr<const std::vector<std::string>> token_bytes)
    : bytes_(std::move(token_bytes)) {
  const std::vector<std::string>& b = *bytes_;
  std::vector<int32_t> all, rest;
  for (size_t id = 0; id < b.size(); ++id) {
    if (b[id].empty()) continue;
    all.push_back(int32_t(id));
    const size_t chars = text_slice_chars(b[id]);
    if (chars == 0 || chars > kMaxSliceChars) {
      rest.push_back(int32_t(id));
      continue;
    }
    if (slice_.size() <= chars) slice_.resize(chars + 1);
    std::vector<uint32_t>& f = slice_first_[uint8_t(b[id][0])];
    if (f.empty()) f.assign((b.size() + 31) / 32, 0);
    f[id / 32] |= 1u << (id % 32);
    if (slice_[chars].empty()) slice_[chars].assign((b.size() + 31) / 32, 0);
    slice_[chars][id / 32] |= 1u << (id % 32);
  }
  // slice_[n]: the tokens of 1..n characters (lengths alive from a state are a prefix).
  for (auto& m : slice_)
    if (m.empty()) m.assign((b.size() + 31) / 32, 0);
  for (auto& f : slice_first_)
    if (f.empty()) f.assign((b.size() + 31) / 32, 0);
  for (size_t n = 2; n < slice_.size(); ++n)
    for (size_t w = 0; w < slice_[n].size(); ++w) slice_[n][w] |= slice_[n - 1][w];
  all_.build(b, std::move(all));
  rest_.build(b, std::move(rest));
}

int32_t TokenTrie::text_successor(ByteAutomaton& a, int32_t s, Memo* memo) {
  if (memo) {
    auto it = memo->successors.find(s);
    if (it != memo->successors.end()) return it->second;
    const int32_t t = text_successor(a, s, nullptr);
    memo->successors.emplace(s, t);
    return t;
  }
  const int32_t to = a.step(s, uint8_t(' '));
  for (int c = 0x21; c < 0x7F; ++c)
    if (c != '"' && c != '\\' && a.step(s, uint8_t(c)) != to) return ByteAutomaton::kUnknown;
  return multibyte_to(a, s, to) ? to : ByteAutomaton::kUnknown;
}

bool TokenTrie::multibyte_to(ByteAutomaton& a, int32_t s, int32_t to) {
  // Every multi-byte character, by the byte ranges of its UTF-8 forms (the states reached
  // after each byte, deduplicated: a handful).
  static const std::vector<std::vector<std::pair<uint8_t, uint8_t>>> kForms = {
      {{0xC2, 0xDF}, {0x80, 0xBF}},
      {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
      {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
      {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}};
  for (const auto& form : kForms) {
    std::vector<int32_t> frontier{s};
    for (auto [lo, hi] : form) {
      std::vector<int32_t> next;
      for (int32_t x : frontier) {
        if (x == ByteAutomaton::kDead) {  // a dead prefix: its characters all die
          next.push_back(x);
          continue;
        }
        for (int c = lo; c <= hi; ++c) next.push_back(a.step(x, uint8_t(c)));
      }
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      frontier = std::move(next);
    }
    if (frontier.size() != 1 || frontier[0] != to) return false;
  }
  return true;
}

void TokenTrie::allowed(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits, Memo* memo) const {
  if (s == ByteAutomaton::kDead) return;
  // The state most printable ASCII characters lead to, and the exceptions.
  std::array<int32_t, 128> next{};
  std::vector<int32_t> seen;  // the states reached, sorted: the longest run is the most common
  for (int c = 0x20; c < 0x7F; ++c) {
    if (c == '"' || c == '\\') continue;
    next[size_t(c)] = a.step(s, uint8_t(c));
    seen.push_back(next[size_t(c)]);
  }
  std::sort(seen.begin(), seen.end());
  int32_t to = ByteAutomaton::kDead;
  size_t most = 0;
  for (size_t i = 0; i < seen.size();) {
    size_t j = i;
    while (j < seen.size() && seen[j] == seen[i]) ++j;
    if (j - i > most) std::tie(to, most) = std::tuple(seen[i], j - i);
    i = j;
  }
  std::array<bool, 256> exception{};
  int n_exceptions = 0;
  for (int c = 0x20; c < 0x7F; ++c)
    if (c != '"' && c != '\\' && next[size_t(c)] != to) {
      exception[size_t(c)] = true;
      ++n_exceptions;
    }
  // The chain of states after 1, 2, ... more text characters from there, while each step is
  // uniform: a slice token of n characters (its first not an exception) is allowed when the
  // chain's (n - 1)-th state is alive.
  bool usable =
      to != ByteAutomaton::kDead && n_exceptions <= kMaxExceptions && multibyte_to(a, s, to);
  std::vector<int32_t> chain{to};
  while (usable && chain.size() + 1 < slice_.size()) {
    const int32_t x = chain.back();
    const int32_t t = x == ByteAutomaton::kDead ? x : text_successor(a, x, memo);
    if (t == ByteAutomaton::kUnknown) usable = false;
    chain.push_back(t);
    if (t == x) break;  // a loop: every longer token stays here
  }
  if (!usable) {
    all_.walk(a, s, bits, memo);
    return;
  }
  // Lengths alive are a prefix (a dead state stays dead): the slice up to the longest, less
  // the tokens that start with an exception.
  size_t alive = 1;
  while (alive + 1 < slice_.size() &&
         chain[std::min(alive, chain.size() - 1)] != ByteAutomaton::kDead)
    ++alive;
  // `bits` comes cleared, so the exceptions can be taken out of it in place.
  const std::vector<uint32_t>& m = slice_[std::min(alive, slice_.size() - 1)];
  const size_t words = std::min(m.size(), bits.size());
  for (size_t w = 0; w < words; ++w) bits[w] |= m[w];
  for (int c = 0x20; c < 0x7F; ++c)
    if (exception[size_t(c)])
      for (size_t w = 0; w < words; ++w) bits[w] &= ~slice_first_[size_t(c)][w];
  // Walked: every token that starts with an exception, and the rest of the others.
  all_.walk_first(a, s, bits, exception, true);
  rest_.walk_first(a, s, bits, exception, false);
}

TokenConstraint::TokenConstraint(std::shared_ptr<ByteAutomaton> automaton,
                                 std::shared_ptr<const TokenTrie> trie,
                                 std::vector<int32_t> stop_tokens)
    : a_(std::move(automaton)),
      trie_(std::move(trie)),
      stops_(std::move(stop_tokens)),
      state_(a_->start()) {
  spacing_.fill(-1);
  std::sort(stops_.begin(), stops_.end());
}

const std::vector<uint32_t>& TokenConstraint::allowed() {
  auto it = masks_.find(state_);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  const size_t vocab = std::max(trie_->vocab(), stops_.empty() ? 0 : size_t(stops_.back()) + 1);
  std::vector<uint32_t> m((vocab + 31) / 32, 0);
  trie_->allowed(*a_, state_, m, &memo_);
  for (int32_t id : stops_) {
    m[size_t(id) / 32] &= ~(1u << (id % 32));
    if (a_->accepting(state_)) m[size_t(id) / 32] |= 1u << (id % 32);
  }
  return masks_.emplace(state_, std::move(m)).first->second;
}

bool TokenConstraint::allows(int32_t token) {
  const std::vector<uint32_t>& m = allowed();
  return token >= 0 && size_t(token) / 32 < m.size() && (m[size_t(token) / 32] >> (token % 32)) & 1;
}

void TokenConstraint::mask(std::span<float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::vector<uint32_t>& m = allowed();
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool ok = id / 32 < m.size() && (m[id / 32] >> (id % 32)) & 1;
    if (!ok) logits[id] = kNegInf;
    any = any || ok;
  }
  check_arg(any, "[grammar] no token can continue the answer under " + a_->describe() + " after '" +
                     tail_ + "'");
}

void TokenConstraint::accept(int32_t token) {
  if (std::binary_search(stops_.begin(), stops_.end(), token)) return;
  if (token >= 0 && size_t(token) < trie_->vocab()) {
    state_ = a_->step(state_, trie_->bytes(token));
    for (char c : trie_->bytes(token)) {
      if (!tail_.empty()) spacing_[uint8_t(tail_.back())] = is_space(uint8_t(c)) ? 1 : 0;
      tail_.push_back(c);
    }
    if (tail_.size() > 48) tail_.erase(0, tail_.size() - 32);
  }
}

bool TokenConstraint::complete() { return a_->accepting(state_); }

std::string TokenConstraint::forced_bytes(size_t max, bool* final) {
  std::string out;
  int32_t s = state_;
  if (final) *final = false;
  uint8_t prev = tail_.empty() ? 0 : uint8_t(tail_.back());
  while (out.size() < max && s != ByteAutomaton::kDead && !a_->accepting(s)) {
    int other = -1, n_other = 0;
    bool space = false;
    for (int b = 0; b < 256 && n_other < 2; ++b) {
      if (a_->step(s, uint8_t(b)) == ByteAutomaton::kDead) continue;
      if (is_space(uint8_t(b))) {
        space = space || b == ' ';
      } else {
        other = b;
        ++n_other;
      }
    }
    if (n_other != 1) break;  // a choice (or only whitespace: how much is the model's)
    const bool spaced = spacing_[prev] >= 0 ? spacing_[prev] == 1 : prev == ',' || prev == ':';
    const uint8_t byte = space && spaced && !is_space(prev) ? uint8_t(' ') : uint8_t(other);
    out.push_back(char(byte));
    s = a_->step(s, byte);
    prev = byte;
  }
  if (final && s != ByteAutomaton::kDead && a_->accepting(s)) {
    bool any = false;
    for (int b = 0; b < 256 && !any; ++b) any = a_->step(s, uint8_t(b)) != ByteAutomaton::kDead;
    *final = !any;
  }
  return out;
}

}  // namespace parley
