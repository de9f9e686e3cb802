#include "grammar/grammar.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <functional>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "io/json_lite.h"

namespace parley {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxElements = 4'000'000;
constexpr size_t kMaxStateStacks = 20000;

using ByteClass = std::bitset<256>;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code point ranges, inclusive

std::array<uint64_t, 4> words_of(const ByteClass& c) {  // byte b: bit b % 64 of word b / 64
  std::array<uint64_t, 4> w{};
  for (size_t b = 0; b < 256; ++b)
    if (c.test(b)) w[b / 64] |= uint64_t(1) << (b % 64);
  return w;
}

// One symbol of an alternative: a byte class or a rule.
struct Sym {
  bool rule = false;
  int32_t id = 0;  // class index or rule index
};
using Seq = std::vector<Sym>;

// Sorted, merged, without the surrogates (no UTF-8 encodes them).
Ranges normalize(Ranges r) {
  Ranges split;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    if (lo < 0xD800 && hi >= 0xD800) {
      split.push_back({lo, 0xD7FF});
      lo = 0xD800;
    }
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (hi <= 0xDFFF) continue;
      lo = 0xE000;
    }
    split.push_back({lo, std::min(hi, kMaxCodePoint)});
  }
  std::sort(split.begin(), split.end());
  Ranges out;
  for (auto [lo, hi] : split) {
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : normalize(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize(out);
}

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// The byte-range sequences whose UTF-8 strings are exactly the code points lo..hi: split
// where the encoded length changes, then where a continuation byte's range would not be
// complete, until each piece is a product of byte ranges.
void utf8_sequences(uint32_t lo, uint32_t hi,
                    std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      utf8_sequences(lo, edge, out);
      utf8_sequences(edge + 1, hi, out);
      return;
    }
  }
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  io::json::append_utf8(a, lo);
  io::json::append_utf8(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t i = 0; i < a.size(); ++i) seq.push_back({uint8_t(a[i]), uint8_t(b[i])});
  out.push_back(std::move(seq));
}

// The grammar as it is built: rules of alternatives of symbols.
struct Builder {
  std::vector<std::vector<Seq>> rules;
  std::vector<std::string> names;  // generated rules: the name of the rule they belong to
  std::string owner;               // the rule being parsed
  std::vector<bool> defined;
  std::map<std::string, int32_t, std::less<>> by_name;
  std::vector<ByteClass> classes;
  std::map<std::array<uint64_t, 4>, int32_t> class_index;  // the class's bits -> class

  int32_t new_rule(std::string name) {
    rules.emplace_back();
    names.push_back(name.empty() ? owner : std::move(name));
    defined.push_back(false);
    return int32_t(rules.size() - 1);
  }
  int32_t named(std::string_view name) {
    auto it = by_name.find(name);
    if (it != by_name.end()) return it->second;
    const int32_t r = new_rule(std::string(name));
    names[size_t(r)] = std::string(name);
    by_name.emplace(std::string(name), r);
    return r;
  }
  Sym byte_class(const ByteClass& c) {
    auto [it, fresh] = class_index.emplace(words_of(c), int32_t(classes.size()));
    if (fresh) classes.push_back(c);
    return {false, it->second};
  }
  std::unordered_map<uint32_t, int32_t> range_class;  // by lo << 8 | hi
  Sym byte_range(uint8_t lo, uint8_t hi) {
    auto [it, fresh] = range_class.emplace(uint32_t(lo) << 8 | hi, 0);
    if (fresh) {
      ByteClass c;
      for (int b = lo; b <= hi; ++b) c.set(size_t(b));
      it->second = byte_class(c).id;
    }
    return {false, it->second};
  }
  Sym rule_of(std::vector<Seq> alts) {
    const int32_t r = new_rule("");
    rules[size_t(r)] = std::move(alts);
    defined[size_t(r)] = true;
    return {true, r};
  }
  // The symbols of a code point class: one byte class when it is ASCII only, else a rule
  // with one alternative per UTF-8 byte-range sequence.
  Seq code_points(const Ranges& ranges) {
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    for (auto [lo, hi] : normalize(ranges)) utf8_sequences(lo, hi, seqs);
    ByteClass single;
    std::vector<Seq> alts;
    for (auto& s : seqs) {
      if (s.size() == 1) {
        for (int b = s[0].first; b <= s[0].second; ++b) single.set(size_t(b));
        continue;
      }
      Seq alt;
      for (auto [lo, hi] : s) alt.push_back(byte_range(lo, hi));
      alts.push_back(std::move(alt));
    }
    if (alts.empty()) return {byte_class(single)};  // an empty class matches nothing
    if (single.any()) alts.insert(alts.begin(), Seq{byte_class(single)});
    return {rule_of(std::move(alts))};
  }
  Seq literal(std::string_view bytes) {
    Seq s;
    for (unsigned char c : bytes) s.push_back(byte_range(c, c));
    return s;
  }
  // One symbol standing for the sequence (a rule unless it is one symbol already).
  Sym as_sym(Seq s) { return s.size() == 1 ? s[0] : rule_of({std::move(s)}); }
  // x repeated min..max times (max -1: unbounded), tail-recursive.
  Seq repeat(const Seq& x, int min, int max) {
    Sym one = as_sym(x);
    Seq out;
    for (int i = 0; i < min; ++i) out.push_back(one);
    if (max < 0) {
      const int32_t star = new_rule("");
      defined[size_t(star)] = true;
      rules[size_t(star)] = {Seq{one, Sym{true, star}}, Seq{}};
      out.push_back({true, star});
    } else if (max > min) {
      Sym opt = rule_of({Seq{one}, Seq{}});
      for (int i = min + 1; i < max; ++i) opt = rule_of({Seq{one, opt}, Seq{}});
      out.push_back(opt);
    }
    return out;
  }
};

// GBNF text -> Builder.
class GbnfParser {
 public:
  GbnfParser(std::string_view text, std::string_view source, Builder& b)
      : s_(text), source_(source), b_(b) {}

  void parse() {
    skip_space(true);
    while (i_ < s_.size()) {
      const size_t at = i_;
      const std::string name = parse_name();
      skip_space(false);
      if (!eat("::=")) fail(at, "expected '::=' after rule name '" + name + "'");
      skip_space(true);
      const int32_t r = b_.named(name);
      if (b_.defined[size_t(r)]) fail(at, "rule '" + name + "' is defined twice");
      b_.defined[size_t(r)] = true;
      b_.owner = name;
      b_.rules[size_t(r)] = parse_alternatives(false);
      skip_space(true);
    }
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(ErrorKind::invalid_argument, "[" + std::string(source_) + "] line " +
                                                 std::to_string(line) + ", column " +
                                                 std::to_string(col) + ": " + what);
  }
  bool eat(std::string_view t) {
    if (s_.substr(i_, t.size()) != t) return false;
    i_ += t.size();
    return true;
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }
  // Spaces and comments; newlines too when `newlines` (inside groups, or between rules).
  void skip_space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }
  std::string parse_name() {
    const size_t at = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == at) fail(at, "expected a rule name");
    return std::string(s_.substr(at, i_ - at));
  }
  // Whether the text at i_ (after spaces and newlines) starts a new rule: name ::=.
  bool at_rule_start() {
    size_t k = i_;
    while (k < s_.size() && name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
    return s_.substr(k, 3) == "::=";
  }
  uint32_t hex(size_t n) {
    const size_t at = i_;
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      if (i_ >= s_.size()) fail(at, "incomplete hex escape");
      const char c = s_[i_++];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) fail(i_ - 1, "invalid hex digit");
      v = v * 16 + uint32_t(d);
    }
    if (v > kMaxCodePoint) fail(at, "code point out of range");
    return v;
  }
  // One character of a literal or class (its code point), escapes decoded.
  uint32_t parse_char() {
    const size_t at = i_;
    if (i_ >= s_.size()) fail(at, "unexpected end of grammar");
    const unsigned char c = uint8_t(s_[i_]);
    if (c == '\\') {
      ++i_;
      if (i_ >= s_.size()) fail(at, "unexpected end after '\\'");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'': return uint8_t(e);
        default: fail(at, std::string("unknown escape '\\") + e + "'");
      }
    }
    // A UTF-8 character of the grammar text itself.
    const int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + size_t(n) > s_.size()) fail(at, "invalid UTF-8 in grammar");
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    return cp;
  }
  std::vector<Seq> parse_alternatives(bool nested) {
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(nested));
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }
  Seq parse_sequence(bool nested) {
    Seq seq;
    while (true) {
      skip_space(nested);
      if (!nested && i_ < s_.size() && s_[i_] == '\n') {
        // A rule continues on the next line unless that line starts a new rule.
        const size_t save = i_;
        skip_space(true);
        if (i_ >= s_.size() || at_rule_start()) {
          i_ = save;
          skip_space(true);
          return seq;
        }
        if (s_[i_] == '|') return seq;
        continue;
      }
      if (i_ >= s_.size() || s_[i_] == '|' || s_[i_] == ')') return seq;
      const size_t at = i_;
      Seq item = parse_item();
      // Postfix operators.
      skip_space(nested);
      if (i_ < s_.size() && (s_[i_] == '*' || s_[i_] == '+' || s_[i_] == '?')) {
        const char op = s_[i_++];
        item = op == '*'   ? b_.repeat(item, 0, -1)
               : op == '+' ? b_.repeat(item, 1, -1)
                           : b_.repeat(item, 0, 1);
      } else if (i_ < s_.size() && s_[i_] == '{') {
        ++i_;
        const int lo = parse_count(at);
        int hi = lo;
        if (eat(",")) hi = i_ < s_.size() && s_[i_] == '}' ? -1 : parse_count(at);
        if (!eat("}")) fail(i_, "expected '}' to close the repetition");
        if (hi >= 0 && hi < lo) fail(at, "repetition {m,n} with n < m");
        item = b_.repeat(item, lo, hi);
      }
      seq.insert(seq.end(), item.begin(), item.end());
    }
  }
  int parse_count(size_t at) {
    skip_space(false);
    const size_t start = i_;
    long v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_++] - '0');
      if (v > kMaxRepeat) fail(at, "repetition count over " + std::to_string(kMaxRepeat));
    }
    if (i_ == start) fail(start, "expected a repetition count");
    skip_space(false);
    return int(v);
  }
  Seq parse_item() {
    const size_t at = i_;
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (true) {
        if (i_ >= s_.size()) fail(at, "unterminated literal");
        if (s_[i_] == '"') break;
        io::json::append_utf8(bytes, parse_char());
      }
      ++i_;
      return b_.literal(bytes);
    }
    if (c == '[') {
      ++i_;
      const bool negated = eat("^");
      Ranges r;
      while (true) {
        if (i_ >= s_.size()) fail(at, "unterminated character class");
        if (s_[i_] == ']') break;
        const uint32_t lo = parse_char();
        uint32_t hi = lo;
        if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
          ++i_;
          hi = parse_char();
          if (hi < lo) fail(at, "character range out of order");
        }
        r.push_back({lo, hi});
      }
      ++i_;
      return b_.code_points(negated ? complement(r) : r);
    }
    if (c == '.') {
      ++i_;
      return b_.code_points({{0, kMaxCodePoint}});
    }
    if (c == '(') {
      ++i_;
      skip_space(true);
      std::vector<Seq> alts = parse_alternatives(true);
      if (!eat(")")) fail(at, "unclosed '('");
      if (alts.size() == 1) return alts[0];
      return {b_.rule_of(std::move(alts))};
    }
    if (name_char(c)) {
      const std::string name = parse_name();
      if (i_ < s_.size() && s_.substr(i_, 3) == "::=")
        fail(at, "expected a newline before rule '" + name + "'");
      auto [it, fresh] = refs_.emplace(name, at);
      (void)it;
      (void)fresh;
      return {Sym{true, b_.named(name)}};
    }
    fail(at, std::string("unexpected character '") + c + "'");
  }

  std::string_view s_;
  std::string_view source_;
  Builder& b_;
  size_t i_ = 0;

 public:
  std::map<std::string, size_t> refs_;  // first reference of each rule name (for errors)
  void check_defined() {
    for (auto& [name, at] : refs_)
      if (!b_.defined[size_t(b_.named(name))]) fail(at, "undefined rule '" + name + "'");
  }
};

// Elements of the flattened grammar: byte classes, rule references, and each
// alternative's end.
struct Element {
  enum Kind : uint8_t { bytes, rule, end } kind;
  int32_t arg;
};

}  // namespace

struct Grammar::Impl {
  std::vector<Element> elems;
  std::vector<std::vector<int32_t>> alts;  // rule -> start positions
  std::vector<ByteClass> classes;
  // classes[k] as words_of gives them, to visit their bytes by the set bits.
  std::vector<std::array<uint64_t, 4>> class_words;
  int32_t root = 0;

  struct Node {
    int32_t pos, parent;  // parent -1: the bottom (popping it completes the text)
  };
  std::vector<Node> nodes;
  std::unordered_map<uint64_t, int32_t> node_index;
  struct Closure {
    std::vector<int32_t> ready;  // nodes whose next element is a byte class, sorted
    bool accept = false;
  };
  // By node: its closure's index in closures (-1: not computed). A reference to a closure
  // lasts until the next closure() call.
  std::vector<int32_t> closure_of;
  std::vector<Closure> closures;
  struct State {
    std::vector<int32_t> ready;
    bool accept = false;
    std::vector<int32_t> next;  // 256 entries; kUnknown until computed
  };
  static constexpr int32_t kUnknown = ByteAutomaton::kUnknown;
  std::vector<State> states;
  // States by a hash of (ready, accept); states of equal hashes are compared in full.
  std::unordered_multimap<uint64_t, int32_t> state_index;
  int32_t start_state = kUnknown;

  // Scratch of closure() and fill(), kept so that a transition allocates nothing once they
  // have grown (most states have 1 to 16 stacks: a transition is a microsecond or less).
  std::vector<uint32_t> visited;  // by node: the closure that last visited it
  uint32_t visit = 0;
  std::vector<int32_t> todo, starts, merged;

  int32_t node(int32_t pos, int32_t parent) {
    const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
    auto [it, fresh] = node_index.emplace(key, int32_t(nodes.size()));
    if (fresh) nodes.push_back({pos, parent});
    return it->second;
  }

  const Closure& closure(int32_t n) {
    if (closure_of.size() <= size_t(n))
      closure_of.resize(std::max(size_t(n) + 1, nodes.size()) * 2, -1);
    if (closure_of[size_t(n)] >= 0) return closures[size_t(closure_of[size_t(n)])];
    Closure c;
    if (++visit == 0) {  // wrapped: every mark is stale
      std::fill(visited.begin(), visited.end(), 0);
      visit = 1;
    }
    todo.assign(1, n);
    while (!todo.empty()) {
      const int32_t k = todo.back();
      todo.pop_back();
      if (visited.size() <= size_t(k)) visited.resize(std::max(size_t(k) + 1, nodes.size()) * 2, 0);
      if (visited[size_t(k)] == visit) continue;
      visited[size_t(k)] = visit;
      const Node nd = nodes[size_t(k)];
      const Element& e = elems[size_t(nd.pos)];
      if (e.kind == Element::bytes) {
        c.ready.push_back(k);
      } else if (e.kind == Element::end) {
        if (nd.parent < 0)
          c.accept = true;
        else
          todo.push_back(nd.parent);
      } else {
        const int32_t ret = elems[size_t(nd.pos) + 1].kind == Element::end
                                ? nd.parent
                                : node(nd.pos + 1, nd.parent);
        for (int32_t a : alts[size_t(e.arg)]) todo.push_back(node(a, ret));
      }
    }
    std::sort(c.ready.begin(), c.ready.end());
    closure_of[size_t(n)] = int32_t(closures.size());
    closures.push_back(std::move(c));
    return closures.back();
  }

  static uint64_t hash(const std::vector<int32_t>& ready, bool accept) {
    uint64_t h = accept ? 0x9E3779B97F4A7C15ull : 0x2545F4914F6CDD1Dull;
    for (int32_t x : ready) h = (h ^ uint32_t(x)) * 0x100000001B3ull + (h >> 29);
    return h;
  }

  int32_t intern(const std::vector<int32_t>& r, bool accept) {
    if (r.empty() && !accept) return ByteAutomaton::kDead;
    check_arg(r.size() <= kMaxStateStacks, "[grammar] the grammar is too ambiguous (over " +
                                               std::to_string(kMaxStateStacks) +
                                               " parses at once)");
    const uint64_t h = hash(r, accept);
    for (auto [it, end] = state_index.equal_range(h); it != end; ++it) {
      const State& st = states[size_t(it->second)];
      if (st.accept == accept && st.ready == r) return it->second;
    }
    states.push_back({r, accept, std::vector<int32_t>(256, kUnknown)});
    state_index.emplace(h, int32_t(states.size() - 1));
    return int32_t(states.size() - 1);
  }

  // The state of the stacks the start nodes close to (their union).
  int32_t merge(const std::vector<int32_t>& from) {
    if (from.size() == 1) {
      const Closure& c = closure(from[0]);
      return intern(c.ready, c.accept);
    }
    merged.clear();
    bool accept = false;
    for (int32_t n : from) {
      const Closure& c = closure(n);
      merged.insert(merged.end(), c.ready.begin(), c.ready.end());
      accept = accept || c.accept;
    }
    std::sort(merged.begin(), merged.end());
    merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
    return intern(merged, accept);
  }

  int32_t step(int32_t s, uint8_t b) {
    const int32_t known = states[size_t(s)].next[b];
    if (known != kUnknown) return known;
    fill(s, b);
    return states[size_t(s)].next[b];
  }

  // The transitions of state s on byte b and on every byte that the same ready nodes accept
  // (its group: inside a string, the text characters, the quote, the backslash, each lead
  // byte's form), which lead to one state: one merge for the group, not one per byte, and
  // none for the groups no walk steps into (a quarter of the states a merge of every group
  // would make are never stepped from).
  void fill(int32_t s, uint8_t b) {
    // Merges add states, moving State objects but not their ready lists' storage.
    const int32_t* ready = states[size_t(s)].ready.data();
    const size_t n_ready = states[size_t(s)].ready.size();
    const size_t w = b / 64;
    const uint64_t bit = uint64_t(1) << (b % 64);
    std::array<uint64_t, 4> group;  // the bytes whose classes hold them as they hold b
    group.fill(~uint64_t(0));
    starts.clear();
    for (size_t i = 0; i < n_ready; ++i) {
      const Node nd = nodes[size_t(ready[i])];
      const std::array<uint64_t, 4>& cw = class_words[size_t(elems[size_t(nd.pos)].arg)];
      const uint64_t keep = cw[w] & bit ? 0 : ~uint64_t(0);  // the class, or its complement
      for (size_t k = 0; k < 4; ++k) group[k] &= cw[k] ^ keep;
      if (!keep) starts.push_back(node(nd.pos + 1, nd.parent));
    }
    // May throw (too ambiguous) before anything is written.
    const int32_t to = starts.empty() ? ByteAutomaton::kDead : merge(starts);
    int32_t* next = states[size_t(s)].next.data();
    for (size_t k = 0; k < 4; ++k)
      for (uint64_t m = group[k]; m; m &= m - 1) next[k * 64 + size_t(__builtin_ctzll(m))] = to;
  }
};

namespace {

// Flattens the built rules and rejects left recursion: a cycle of rules that can reach each
// other before consuming a byte, through at least one reference that is not its
// alternative's last element (those alone would return to the same stack: a loop the
// closure's visited set ends).
void flatten(Builder& b, Grammar::Impl& g, std::string_view source) {
  const size_t nr = b.rules.size();
  std::vector<bool> nullable(nr, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r) {
      if (nullable[r]) continue;
      for (const Seq& alt : b.rules[r]) {
        bool all = true;
        for (const Sym& s : alt) all = all && s.rule && nullable[size_t(s.id)];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Left-corner edges r -> target, `tail` when the reference ends its alternative.
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(nr);
  for (size_t r = 0; r < nr; ++r)
    for (const Seq& alt : b.rules[r])
      for (size_t k = 0; k < alt.size(); ++k) {
        if (!alt[k].rule) break;
        edges[r].push_back({alt[k].id, k + 1 == alt.size()});
        if (!nullable[size_t(alt[k].id)]) break;
      }
  // Tarjan's strongly connected components, iteratively.
  std::vector<int32_t> index(nr, -1), low(nr, 0), comp(nr, -1), stack;
  std::vector<bool> on(nr, false);
  int32_t counter = 0, ncomp = 0;
  for (size_t root = 0; root < nr; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> work{{int32_t(root), 0}};
    while (!work.empty()) {
      auto& [v, ei] = work.back();
      if (ei == 0 && index[size_t(v)] < 0) {
        index[size_t(v)] = low[size_t(v)] = counter++;
        stack.push_back(v);
        on[size_t(v)] = true;
      }
      if (ei < edges[size_t(v)].size()) {
        const int32_t w = edges[size_t(v)][ei++].to;
        if (index[size_t(w)] < 0) {
          work.push_back({w, 0});
        } else if (on[size_t(w)]) {
          low[size_t(v)] = std::min(low[size_t(v)], index[size_t(w)]);
        }
        continue;
      }
      if (low[size_t(v)] == index[size_t(v)]) {
        while (true) {
          const int32_t w = stack.back();
          stack.pop_back();
          on[size_t(w)] = false;
          comp[size_t(w)] = ncomp;
          if (w == v) break;
        }
        ++ncomp;
      }
      const int32_t done = v;
      work.pop_back();
      if (!work.empty()) {
        const int32_t parent = work.back().first;
        low[size_t(parent)] = std::min(low[size_t(parent)], low[size_t(done)]);
      }
    }
  }
  for (size_t r = 0; r < nr; ++r)
    for (const Edge& e : edges[r])
      if (!e.tail && comp[r] == comp[size_t(e.to)])
        throw Error(ErrorKind::invalid_argument,
                    "[" + std::string(source) + "] left recursion in rule '" + b.names[r] +
                        "' (a rule that reaches itself before matching a character)");

  g.classes = b.classes;
  for (const ByteClass& c : g.classes) g.class_words.push_back(words_of(c));
  g.alts.resize(nr);
  for (size_t r = 0; r < nr; ++r)
    for (const Seq& alt : b.rules[r]) {
      g.alts[r].push_back(int32_t(g.elems.size()));
      for (const Sym& s : alt) g.elems.push_back({s.rule ? Element::rule : Element::bytes, s.id});
      g.elems.push_back({Element::end, 0});
      check_arg(g.elems.size() <= kMaxElements, "[" + std::string(source) + "] grammar too large");
    }
}

}  // namespace

std::shared_ptr<Grammar> Grammar::compile_gbnf(std::string_view gbnf, std::string_view source,
                                               std::string_view start) {
  Builder b;
  GbnfParser p(gbnf, source, b);
  p.parse();
  p.check_defined();
  auto it = b.by_name.find(start);
  check_arg(it != b.by_name.end() && b.defined[size_t(it->second)],
            "[" + std::string(source) + "] the grammar has no '" + std::string(start) + "' rule");
  auto impl = std::make_unique<Impl>();
  impl->root = it->second;
  flatten(b, *impl, source);
  return std::shared_ptr<Grammar>(new Grammar(std::move(impl), "the " + std::string(source)));
}

Grammar::Grammar(std::unique_ptr<Impl> impl, std::string describe)
    : impl_(std::move(impl)), describe_(std::move(describe)) {}
Grammar::~Grammar() = default;

int32_t Grammar::start() {
  if (impl_->start_state == Impl::kUnknown) {
    std::vector<int32_t> starts;
    for (int32_t a : impl_->alts[size_t(impl_->root)]) starts.push_back(impl_->node(a, -1));
    impl_->start_state = impl_->merge(starts);
  }
  return impl_->start_state;
}

int32_t Grammar::step(int32_t s, uint8_t b) { return s < 0 ? kDead : impl_->step(s, b); }

bool Grammar::accepting(int32_t s) { return s >= 0 && impl_->states[size_t(s)].accept; }

const int32_t* Grammar::transitions(int32_t s) { return impl_->states[size_t(s)].next.data(); }

size_t Grammar::states() const { return impl_->states.size(); }

}  // namespace parley
