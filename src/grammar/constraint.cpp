#include "grammar/constraint.h"

#include <algorithm>
#include <array>
#include <bit>
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
// First characters that may lead elsewhere than the others (alive) before a mask walks the
// whole trie.
constexpr int kMaxExceptions = 40;
// ASCII characters that must lead on after a slice token's first for the slice path: with
// fewer (digits, hex, [a-z]), the walk's paths die young and cost less than the bitsets.
constexpr int kMinLater = 30;
// Slice tokens holding a character that leads elsewhere (stepped one by one) before a mask
// walks the whole trie instead (its memo reuses the subtrees of the state most lead to: an
// unanchored pattern's letter).
constexpr size_t kMaxStepped = 8000;
// Ids below which a set is applied from its list rather than its bits (a pass over the 19 KB
// of a 151k vocabulary's bits costs about as much).
constexpr size_t kListIds = 1000;
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
      check_arg(d < 0xFFFF, "[grammar] a token of over 65535 bytes");
      nodes.push_back({uint8_t(s[d]), uint16_t(d + 1), 0});
      first.push_back(int32_t(ids.size()));
    }
    ids.push_back(id);
    max_depth = std::max(max_depth, s.size());
    prev = s;
  }
  first.push_back(int32_t(ids.size()));
  // The node after k's subtree is the next node not deeper than k.
  const int32_t n = int32_t(nodes.size());
  for (Node& nd : nodes) nd.skip = n;
  std::vector<int32_t> open;
  for (int32_t k = 0; k < n; ++k) {
    while (!open.empty() && nodes[size_t(open.back())].depth >= nodes[size_t(k)].depth) {
      nodes[size_t(open.back())].skip = k;
      open.pop_back();
    }
    open.push_back(k);
  }
}

const int32_t* TokenTrie::Tables::fetch(int32_t s) {
  if (!cache) return a.transitions(s);
  if (cache->size() <= size_t(s)) cache->resize(size_t(s) + 1 + size_t(s) / 2, nullptr);
  const int32_t*& t = (*cache)[size_t(s)];
  if (!t) t = a.transitions(s);
  return t;
}

template <class Emit>
void TokenTrie::Trie::walk_range(Tables& tables, int32_t begin, int32_t end, int32_t s,
                                 Emit emit) const {
  if (begin >= end) return;
  // The state and its transition table per depth along the current path.
  const size_t d0 = nodes[size_t(begin)].depth;
  // Scratch kept per thread: a mask walks up to 256 ranges (walk_first, the subtree memo),
  // and every entry is written before it is read.
  static thread_local std::vector<int32_t> at;
  static thread_local std::vector<const int32_t*> table;
  at.resize(max_depth + 1);
  table.resize(max_depth + 1);
  at[d0 - 1] = s;
  table[d0 - 1] = tables(s);
  for (int32_t k = begin; k < end;) {
    const Node nd = nodes[size_t(k)];
    int32_t t = table[nd.depth - 1][nd.byte];
    if (t == ByteAutomaton::kUnknown) t = tables.a.step(at[nd.depth - 1], nd.byte);
    if (t == ByteAutomaton::kDead) {
      k = nd.skip;
      continue;
    }
    if (nd.skip > k + 1) {  // a child follows
      at[nd.depth] = t;
      table[nd.depth] = tables(t);
    }
    for (int32_t i = first[size_t(k)]; i < first[size_t(k) + 1]; ++i) emit(ids[size_t(i)]);
    ++k;
  }
}

void TokenTrie::Trie::walk(Tables& tables, int32_t s, std::span<uint32_t> bits, Memo* memo) const {
  const auto set = [&](int32_t id) { bits[size_t(id) / 32] |= 1u << (id % 32); };
  const int32_t n = int32_t(nodes.size());
  if (!memo) {
    walk_range(tables, 0, n, s, set);
    return;
  }
  if (memo->ids > kMaxMemoIds) {
    memo->subtrees.clear();
    memo->ids = 0;
  }
  const int32_t* table = tables(s);
  for (int32_t k = 0; k < n; k = nodes[size_t(k)].skip) {  // the first-byte nodes
    const uint8_t b = nodes[size_t(k)].byte;
    int32_t t = table[b];
    if (t == ByteAutomaton::kUnknown) t = tables.a.step(s, b);
    if (t == ByteAutomaton::kDead) continue;
    const uint64_t key = (uint64_t(uint32_t(k)) << 32) | uint32_t(t);
    auto it = memo->subtrees.find(key);
    if (it == memo->subtrees.end()) {
      std::vector<int32_t> found(ids.begin() + first[size_t(k)],
                                 ids.begin() + first[size_t(k) + 1]);
      walk_range(tables, k + 1, nodes[size_t(k)].skip, t, [&](int32_t id) { found.push_back(id); });
      memo->ids += found.size();
      it = memo->subtrees.emplace(key, std::move(found)).first;
    }
    for (int32_t id : it->second) set(id);
  }
}

void TokenTrie::Trie::walk_first(Tables& tables, int32_t s, std::span<uint32_t> bits,
                                 const std::array<bool, 256>& first, bool want) const {
  const auto set = [&](int32_t id) { bits[size_t(id) / 32] |= 1u << (id % 32); };
  const int32_t n = int32_t(nodes.size());
  for (int32_t k = 0; k < n; k = nodes[size_t(k)].skip)  // the first-byte nodes
    if (first[nodes[size_t(k)].byte] == want) walk_range(tables, k, nodes[size_t(k)].skip, s, set);
}

TokenTrie::TokenTrie(std::shared_ptr<const std::vector<std::string>> token_bytes)
    : bytes_(std::move(token_bytes)) {
  const std::vector<std::string>& b = *bytes_;
  const size_t words = (b.size() + 31) / 32;
  const auto set = [&](std::vector<uint32_t>& bits, size_t id) {
    if (bits.empty()) bits.assign(words, 0);
    bits[id / 32] |= 1u << (id % 32);
  };
  std::vector<int32_t> all, rest;
  later_.assign(b.size(), {});
  for (size_t id = 0; id < b.size(); ++id) {
    if (b[id].empty()) continue;
    all.push_back(int32_t(id));
    const size_t chars = text_slice_chars(b[id]);
    if (chars == 0 || chars > kMaxSliceChars) {
      rest.push_back(int32_t(id));
      continue;
    }
    if (slice_.size() <= chars) slice_.resize(chars + 1);
    set(slice_[chars], id);
    set(slice_first_[uint8_t(b[id][0])], id);
    slice_first_ids_[uint8_t(b[id][0]) < 0x80 ? uint8_t(b[id][0]) : kMultibyte].push_back(
        int32_t(id));
    if (uint8_t(b[id][0]) >= 0x80) set(slice_first_multibyte_, id);
    // Where each character first occurs after the first (a slice token is valid UTF-8).
    std::array<bool, kMultibyte + 1> seen{};
    size_t at = 0;
    for (size_t i = 0; i < b[id].size(); ++at) {
      const uint8_t c = uint8_t(b[id][i]);
      const size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      const size_t cls = c < 0x80 ? c : kMultibyte;
      i += len;
      if (at == 0 || seen[cls]) continue;
      seen[cls] = true;
      if (cls == kMultibyte)
        later_[id][0] |= 1;
      else
        later_[id][cls / 64] |= uint64_t(1) << (cls % 64);
      set(holding_[cls], id);
      holding_ids_[cls].push_back(int32_t(id));
      holding_at_[cls].push_back(uint8_t(at));
    }
  }
  // slice_[n]: the tokens of 1..n characters (lengths alive from a state are a prefix).
  for (auto& m : slice_)
    if (m.empty()) m.assign(words, 0);
  for (auto& f : slice_first_)
    if (f.empty()) f.assign(words, 0);
  if (slice_first_multibyte_.empty()) slice_first_multibyte_.assign(words, 0);
  for (size_t n = 2; n < slice_.size(); ++n)
    for (size_t w = 0; w < slice_[n].size(); ++w) slice_[n][w] |= slice_[n - 1][w];
  all_.build(b, std::move(all));
  rest_.build(b, std::move(rest));
}

namespace {

bool is_text_ascii(int c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; }

// Bitset passes (restrict: the compiler vectorizes them).
void or_bits(uint32_t* __restrict out, const uint32_t* __restrict m, size_t n) {
  for (size_t w = 0; w < n; ++w) out[w] |= m[w];
}
void and_bits(uint32_t* __restrict out, const uint32_t* __restrict m, size_t n) {
  for (size_t w = 0; w < n; ++w) out[w] &= m[w];
}
void and_not_bits(uint32_t* __restrict out, const uint32_t* __restrict m, size_t n) {
  for (size_t w = 0; w < n; ++w) out[w] &= ~m[w];
}
bool has(const std::array<uint64_t, 2>& set, int c) {
  return (set[size_t(c) / 64] >> (c % 64)) & 1;
}

}  // namespace

TokenTrie::Partition TokenTrie::partition(ByteAutomaton& a, int32_t s) {
  Partition p;
  std::array<int32_t, 128> next{};
  std::array<int32_t, 128> live;  // the live states reached, sorted: the longest run wins
  size_t n_live = 0;
  for (int c = 0x20; c < 0x7F; ++c) {
    if (!is_text_ascii(c)) continue;
    next[size_t(c)] = a.step(s, uint8_t(c));
    if (next[size_t(c)] != ByteAutomaton::kDead) live[n_live++] = next[size_t(c)];
  }
  std::sort(live.begin(), live.begin() + ptrdiff_t(n_live));
  p.next = ByteAutomaton::kDead;
  size_t most = 0;
  for (size_t i = 0; i < n_live;) {
    size_t j = i;
    while (j < n_live && live[j] == live[i]) ++j;
    if (j - i > most) std::tie(p.next, most) = std::tuple(live[i], j - i);
    i = j;
  }
  for (int c = 0x20; c < 0x7F; ++c) {
    if (!is_text_ascii(c) || next[size_t(c)] == p.next) continue;
    auto& set = next[size_t(c)] == ByteAutomaton::kDead ? p.dead : p.other;
    set[size_t(c) / 64] |= uint64_t(1) << (c % 64);
  }
  // Multi-byte characters: dead when every lead byte is (the common case outside strings),
  // else `next` when all lead there, else stepped (other).
  bool leads_dead = true;
  for (int c = 0xC2; c <= 0xF4 && leads_dead; ++c)
    leads_dead = a.step(s, uint8_t(c)) == ByteAutomaton::kDead;
  p.multibyte = leads_dead ? Partition::Way::dead
                : p.next != ByteAutomaton::kDead && multibyte_to(a, s, p.next)
                    ? Partition::Way::next
                    : Partition::Way::other;
  return p;
}

bool TokenTrie::multibyte_to(ByteAutomaton& a, int32_t s, int32_t to) {
  // Every multi-byte character, by the byte ranges of its UTF-8 forms (the states reached
  // after each byte, deduplicated: a handful; more than kMaxFrontier answers false).
  struct Range {
    uint8_t lo, hi;
  };
  struct Form {
    size_t n;
    std::array<Range, 4> ranges;
  };
  static constexpr std::array<Form, 8> kForms = {{
      {2, {{{0xC2, 0xDF}, {0x80, 0xBF}}}},
      {3, {{{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}}}},
      {3, {{{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {3, {{{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}}}},
      {3, {{{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {4, {{{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {4, {{{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {4, {{{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}}},
  }};
  constexpr size_t kMaxFrontier = 16;
  for (const Form& form : kForms) {
    std::array<int32_t, kMaxFrontier> frontier{s}, next;
    size_t n_frontier = 1;
    for (size_t r = 0; r < form.n; ++r) {
      const bool last = r + 1 == form.n;
      size_t n_next = 0;
      for (size_t f = 0; f < n_frontier; ++f) {
        const int32_t x = frontier[f];
        if (x == ByteAutomaton::kDead) {  // a dead prefix (to is kDead): its characters die
          if (!last && std::find(next.begin(), next.begin() + ptrdiff_t(n_next), x) ==
                           next.begin() + ptrdiff_t(n_next))
            next[n_next++] = x;
          continue;
        }
        for (int c = form.ranges[r].lo; c <= form.ranges[r].hi; ++c) {
          const int32_t y = a.step(x, uint8_t(c));
          if (last) {
            if (y != to) return false;
            continue;
          }
          if (y == ByteAutomaton::kDead && to != ByteAutomaton::kDead) return false;
          if (std::find(next.begin(), next.begin() + ptrdiff_t(n_next), y) !=
              next.begin() + ptrdiff_t(n_next))
            continue;
          if (n_next == kMaxFrontier) return false;
          next[n_next++] = y;
        }
      }
      frontier = next;
      n_frontier = n_next;
    }
  }
  return true;
}

void TokenTrie::allowed(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits, Memo* memo) const {
  if (s == ByteAutomaton::kDead) return;
  Tables tables{a, memo ? &memo->tables : nullptr};
  if (!allowed_slice(a, tables, s, bits, memo)) all_.walk(tables, s, bits, memo);
}

bool TokenTrie::allowed_slice(ByteAutomaton& a, Tables& tables, int32_t s, std::span<uint32_t> bits,
                              Memo* memo) const {
  if (slice_.size() < 2) return false;
  const auto part = [&](int32_t x) {
    if (!memo) return partition(a, x);
    auto it = memo->partitions.find(x);
    if (it == memo->partitions.end()) it = memo->partitions.emplace(x, partition(a, x)).first;
    return it->second;
  };
  // The first character: to T, or one of the exceptions, walked (cheap when they die).
  const Partition p0 = part(s);
  const int32_t to = p0.next;
  if (to == ByteAutomaton::kDead) return false;
  const int n_other = std::popcount(p0.other[0]) + std::popcount(p0.other[1]) +
                      int(p0.multibyte == Partition::Way::other);
  if (n_other > kMaxExceptions) return false;
  // The chain of states x[i] after T and i - 1 more characters, while each splits the
  // characters as T does (p1): a token of n characters, all after its first leading on, is
  // allowed when x[n] is alive; lengths alive are a prefix (a dead state stays dead).
  const size_t max_chars = slice_.size() - 1;
  std::array<int32_t, kMaxSliceChars + 2> x;
  x[1] = to;
  const Partition p1 = part(to);
  // Few characters leading on after the first: the walk dies young (digits, hex, a literal),
  // cheaper than the bitsets' passes.
  const int n_later = 93 - std::popcount(p1.dead[0]) - std::popcount(p1.dead[1]) -
                      std::popcount(p1.other[0]) - std::popcount(p1.other[1]);
  if (p1.next != ByteAutomaton::kDead && n_later < kMinLater) return false;
  Partition cur = p1;
  size_t alive = 0;
  for (size_t i = 1;; ++i) {
    if (cur.next == ByteAutomaton::kDead) {  // every character ends here, but the others
      if (cur.multibyte == Partition::Way::other && p1.multibyte != Partition::Way::other)
        return false;
      alive = i;
      break;
    }
    if (i > 1 && (cur.dead != p1.dead || cur.other != p1.other || cur.multibyte != p1.multibyte))
      return false;
    if (cur.next == x[i] || i + 1 >= max_chars) {  // a loop, or the longest token
      alive = max_chars;
      break;
    }
    x[i + 1] = cur.next;
    cur = part(x[i + 1]);
  }
  // Many tokens holding a character that leads elsewhere (a pattern's letter): each would
  // be stepped, and the memo'd walk reuses the subtrees of the state most lead to.
  size_t n_stepped = 0;
  for (int c = 0x20; c < 0x7F; ++c)
    if (is_text_ascii(c) && has(p1.other, c)) n_stepped += holding_ids_[size_t(c)].size();
  if (p1.multibyte == Partition::Way::other) n_stepped += holding_ids_[kMultibyte].size();
  if (n_stepped > kMaxStepped) return false;
  // The bits: the slice up to `alive` characters, less the tokens whose first character
  // does not lead to T and those holding a later character that does not lead on. `bits`
  // comes cleared, so they are taken out in place.
  uint32_t* out = bits.data();
  const size_t words = std::min(slice_[alive].size(), bits.size());
  // A set of ids as bits or as a list, whichever is cheaper to apply.
  const auto put_in = [&](const std::vector<uint32_t>& m, const std::vector<int32_t>& ids) {
    if (ids.size() < kListIds)
      for (int32_t id : ids) out[size_t(id) / 32] |= 1u << (id % 32);
    else
      or_bits(out, m.data(), words);
  };
  const auto take_out = [&](const std::vector<uint32_t>& m, const std::vector<int32_t>& ids) {
    if (ids.size() < kListIds)
      for (int32_t id : ids) out[size_t(id) / 32] &= ~(1u << (id % 32));
    else
      and_not_bits(out, m.data(), words);
  };
  // What applying a set costs, in list ids.
  const auto cost = [&](const std::vector<int32_t>& ids) { return std::min(ids.size(), kListIds); };
  std::array<bool, 256> exception{};  // first bytes walked
  size_t n_first = 0, first_ids = 0;  // ASCII characters leading to T; their slice tokens
  for (int c = 0x20; c < 0x7F; ++c) {
    if (!is_text_ascii(c)) continue;
    exception[size_t(c)] = has(p0.dead, c) || has(p0.other, c);
    n_first += !exception[size_t(c)];
    first_ids += exception[size_t(c)] ? 0 : slice_first_ids_[size_t(c)].size();
  }
  const bool multibyte_first = p0.multibyte == Partition::Way::next;
  for (size_t c = 0x80; c < 256; ++c) exception[c] = !multibyte_first;
  if (multibyte_first) first_ids += slice_first_ids_[kMultibyte].size();
  if (n_first < 40) {  // OR the few first characters in
    for (int c = 0x20; c < 0x7F; ++c)
      if (is_text_ascii(c) && !exception[size_t(c)])
        put_in(slice_first_[size_t(c)], slice_first_ids_[size_t(c)]);
    if (multibyte_first) put_in(slice_first_multibyte_, slice_first_ids_[kMultibyte]);
    and_bits(out, slice_[alive].data(), words);
  } else {
    or_bits(out, slice_[alive].data(), words);
    for (int c = 0x20; c < 0x7F; ++c)
      if (exception[size_t(c)]) take_out(slice_first_[size_t(c)], slice_first_ids_[size_t(c)]);
    if (!multibyte_first) take_out(slice_first_multibyte_, slice_first_ids_[kMultibyte]);
  }
  // Less the tokens holding a later character that does not lead on: by the characters'
  // sets, or by each candidate's characters when that is cheaper (a few first characters,
  // most later ones dead: about two list ids' cost a candidate, its characters read at
  // random).
  if (alive >= 2) {
    std::array<uint64_t, 2> on{};  // characters leading on (bit 0: multi-byte ones)
    size_t off_cost = 0;
    for (int c = 0x20; c < 0x7F; ++c) {
      if (!is_text_ascii(c)) continue;
      if (has(p1.dead, c) || has(p1.other, c))
        off_cost += cost(holding_ids_[size_t(c)]);
      else
        on[size_t(c) / 64] |= uint64_t(1) << (c % 64);
    }
    if (p1.multibyte == Partition::Way::next)
      on[0] |= 1;
    else
      off_cost += cost(holding_ids_[kMultibyte]);
    if (off_cost > 2 * first_ids) {
      for (size_t w = 0; w < words; ++w)
        for (uint32_t m = out[w]; m; m &= m - 1) {
          const size_t id = w * 32 + size_t(std::countr_zero(m));
          if ((later_[id][0] & ~on[0]) | (later_[id][1] & ~on[1])) out[w] &= ~(1u << (id % 32));
        }
    } else {
      for (int c = 0x20; c < 0x7F; ++c)
        if (is_text_ascii(c) && !has(on, c)) take_out(holding_[size_t(c)], holding_ids_[size_t(c)]);
      if (!(on[0] & 1)) take_out(holding_[kMultibyte], holding_ids_[kMultibyte]);
    }
  }
  // Stepped one by one: the tokens (first character to T) holding a later character that
  // leads elsewhere, from T on.
  static thread_local std::vector<uint32_t> seen;  // kept per thread, cleared after use
  static thread_local std::vector<int32_t> touched;
  seen.resize(words, 0);
  touched.clear();
  const auto step_on = [&](int32_t id) {
    const std::string& b = bytes(id);
    const uint8_t c0 = uint8_t(b[0]);
    size_t i = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : 2;
    int32_t st = to;
    for (; i < b.size() && st != ByteAutomaton::kDead; ++i) {
      const int32_t n = tables(st)[uint8_t(b[i])];
      st = n != ByteAutomaton::kUnknown ? n : a.step(st, uint8_t(b[i]));
    }
    if (st != ByteAutomaton::kDead) out[size_t(id) / 32] |= 1u << (id % 32);
  };
  const auto step_holding = [&](size_t cls) {
    const std::vector<int32_t>& ids = holding_ids_[cls];
    for (size_t k = 0; k < ids.size(); ++k) {
      const int32_t id = ids[k];
      if (holding_at_[cls][k] > alive || exception[uint8_t(bytes(id)[0])]) continue;
      uint32_t& w = seen[size_t(id) / 32];
      const uint32_t bit = 1u << (id % 32);
      if (w & bit) continue;
      w |= bit;
      touched.push_back(id);
      step_on(id);
    }
  };
  for (int c = 0x20; c < 0x7F; ++c)
    if (is_text_ascii(c) && has(p1.other, c)) step_holding(size_t(c));
  if (p1.multibyte == Partition::Way::other) step_holding(kMultibyte);
  for (int32_t id : touched) seen[size_t(id) / 32] = 0;
  // Walked: every token that starts with an exception, and the rest of the others.
  all_.walk_first(tables, s, bits, exception, true);
  rest_.walk_first(tables, s, bits, exception, false);
  return true;
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
