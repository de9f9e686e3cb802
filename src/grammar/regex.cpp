#include "grammar/regex.h"

#include <algorithm>
#include <map>

#include "engine/error.h"
#include "io/json_lite.h"

namespace parley {

namespace {

constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxNfaStates = 200000;

struct Node {
  enum Kind { empty, set, concat, alt, repeat } kind = empty;
  std::vector<std::pair<uint8_t, uint8_t>> ranges;  // set: byte ranges
  std::vector<Node> kids;
  int min = 0, max = 0;  // repeat: max -1 = unbounded
};

Node set_of(std::vector<std::pair<uint8_t, uint8_t>> r) {
  Node n;
  n.kind = Node::set;
  n.ranges = std::move(r);
  return n;
}

Node concat_of(std::vector<Node> kids) {
  Node n;
  n.kind = Node::concat;
  n.kids = std::move(kids);
  return n;
}

Node alt_of(std::vector<Node> kids) {
  Node n;
  n.kind = Node::alt;
  n.kids = std::move(kids);
  return n;
}

Node bytes_of(std::string_view s) {
  std::vector<Node> k;
  for (unsigned char c : s) k.push_back(set_of({{c, c}}));
  return k.size() == 1 ? std::move(k[0]) : concat_of(std::move(k));
}

// Any multi-byte UTF-8 character (lead byte, then continuation bytes).
Node any_multibyte() {
  const std::pair<uint8_t, uint8_t> cont{0x80, 0xBF};
  return alt_of(
      {concat_of({set_of({{0xC2, 0xDF}}), set_of({cont})}),
       concat_of({set_of({{0xE0, 0xEF}}), set_of({cont}), set_of({cont})}),
       concat_of({set_of({{0xF0, 0xF4}}), set_of({cont}), set_of({cont}), set_of({cont})})});
}

// The ASCII complement of a set of ASCII ranges.
std::vector<std::pair<uint8_t, uint8_t>> ascii_complement(
    std::vector<std::pair<uint8_t, uint8_t>> r) {
  bool in[128] = {};
  for (auto [lo, hi] : r)
    for (int c = lo; c <= hi && c < 128; ++c) in[c] = true;
  std::vector<std::pair<uint8_t, uint8_t>> out;
  for (int c = 0; c < 128;) {
    if (in[c]) {
      ++c;
      continue;
    }
    int e = c;
    while (e + 1 < 128 && !in[e + 1]) ++e;
    out.push_back({uint8_t(c), uint8_t(e)});
    c = e + 1;
  }
  return out;
}

}  // namespace

// The pattern's parser (recursive descent) and the NFA builder.
class RegexParser {
 public:
  RegexParser(std::string_view p, Regex& re) : p_(p), re_(re) {}

  Node parse() {
    if (peek('^')) ++i_;
    Node n = alternation();
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return n;
  }

  std::pair<int32_t, int32_t> build(const Node& n) {
    check(re_.nfa_.size() < kMaxNfaStates, ErrorKind::invalid_argument,
          "regex: the pattern is too large (over " + std::to_string(kMaxNfaStates) +
              " automaton states)");
    const int32_t s = re_.add_nfa_state();
    switch (n.kind) {
      case Node::empty: return {s, s};
      case Node::set: {
        const int32_t e = re_.add_nfa_state();
        for (auto [lo, hi] : n.ranges) re_.nfa_[size_t(s)].edges.push_back({lo, hi, e});
        return {s, e};
      }
      case Node::concat: {
        int32_t end = s;
        for (const Node& k : n.kids) {
          auto [ks, ke] = build(k);
          re_.nfa_[size_t(end)].eps.push_back(ks);
          end = ke;
        }
        return {s, end};
      }
      case Node::alt: {
        const int32_t e = re_.add_nfa_state();
        for (const Node& k : n.kids) {
          auto [ks, ke] = build(k);
          re_.nfa_[size_t(s)].eps.push_back(ks);
          re_.nfa_[size_t(ke)].eps.push_back(e);
        }
        return {s, e};
      }
      case Node::repeat: {
        int32_t end = s;
        for (int i = 0; i < n.min; ++i) {
          auto [ks, ke] = build(n.kids[0]);
          re_.nfa_[size_t(end)].eps.push_back(ks);
          end = ke;
        }
        const int32_t e = re_.add_nfa_state();
        if (n.max < 0) {  // a loop: end -> kid -> end
          auto [ks, ke] = build(n.kids[0]);
          re_.nfa_[size_t(end)].eps.push_back(ks);
          re_.nfa_[size_t(ke)].eps.push_back(end);
          re_.nfa_[size_t(end)].eps.push_back(e);
        } else {
          for (int i = n.min; i < n.max; ++i) {  // optional copies, each may stop here
            re_.nfa_[size_t(end)].eps.push_back(e);
            auto [ks, ke] = build(n.kids[0]);
            re_.nfa_[size_t(end)].eps.push_back(ks);
            end = ke;
          }
          re_.nfa_[size_t(end)].eps.push_back(e);
        }
        return {s, e};
      }
    }
    return {s, s};
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(
        ErrorKind::invalid_argument,
        "regex: " + what + " at position " + std::to_string(i_) + " of '" + std::string(p_) + "'");
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  Node alternation() {
    std::vector<Node> alts{concatenation()};
    while (peek('|')) {
      ++i_;
      alts.push_back(concatenation());
    }
    return alts.size() == 1 ? std::move(alts[0]) : alt_of(std::move(alts));
  }

  Node concatenation() {
    std::vector<Node> parts;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && i_ + 1 == p_.size()) {  // the end anchor: a full match anyway
        ++i_;
        break;
      }
      parts.push_back(repetition());
    }
    if (parts.empty()) return Node{};
    return parts.size() == 1 ? std::move(parts[0]) : concat_of(std::move(parts));
  }

  int number() {
    const size_t from = i_;
    long v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9' && v <= kMaxRepeat)
      v = v * 10 + (p_[i_++] - '0');
    if (i_ == from) fail("a number was expected");
    if (v > kMaxRepeat) fail("a repeat count above " + std::to_string(kMaxRepeat));
    return int(v);
  }

  Node repetition() {
    Node atom_node = atom();
    for (;;) {
      int mn = 0, mx = 0;
      if (peek('*')) {
        mn = 0, mx = -1, ++i_;
      } else if (peek('+')) {
        mn = 1, mx = -1, ++i_;
      } else if (peek('?')) {
        mn = 0, mx = 1, ++i_;
      } else if (peek('{') && i_ + 1 < p_.size() && p_[i_ + 1] >= '0' && p_[i_ + 1] <= '9') {
        ++i_;
        mn = mx = number();
        if (peek(',')) {
          ++i_;
          mx = peek('}') ? -1 : number();
        }
        if (!peek('}')) fail("'}' expected");
        ++i_;
        if (mx >= 0 && mx < mn) fail("{n,m} with m < n");
      } else {
        return atom_node;
      }
      if (peek('?')) ++i_;  // lazy: the same language
      if (peek('+')) fail("possessive quantifiers are not supported");
      Node r;
      r.kind = Node::repeat;
      r.min = mn;
      r.max = mx;
      r.kids.push_back(std::move(atom_node));
      atom_node = std::move(r);
    }
  }

  // One UTF-8 character of the pattern (a literal); its code point.
  uint32_t utf8_char(std::string& bytes) {
    const unsigned char c = uint8_t(p_[i_]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i_ + size_t(len) > p_.size()) fail("an incomplete UTF-8 character");
    bytes.assign(p_.substr(i_, size_t(len)));
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(p_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(len);
    return cp;
  }

  // An escape after '\' (i_ at the letter): a class (ranges + whether it also matches
  // non-ASCII characters) or one code point.
  struct Esc {
    bool is_class = false;
    std::vector<std::pair<uint8_t, uint8_t>> ranges;
    bool multibyte = false;
    uint32_t cp = 0;
  };
  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size()) fail("a hex digit was expected");
      const char c = p_[i_];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) fail("a hex digit was expected");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }
  Esc escape() {
    if (i_ >= p_.size()) fail("a trailing backslash");
    const char c = p_[i_++];
    Esc e;
    const std::vector<std::pair<uint8_t, uint8_t>> digit{{'0', '9'}},
        word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}, space{{' ', ' '}, {'\t', '\r'}};
    switch (c) {
      case 'd': e.is_class = true, e.ranges = digit; return e;
      case 'w': e.is_class = true, e.ranges = word; return e;
      case 's': e.is_class = true, e.ranges = space; return e;
      case 'D': e.is_class = true, e.ranges = ascii_complement(digit), e.multibyte = true; return e;
      case 'W': e.is_class = true, e.ranges = ascii_complement(word), e.multibyte = true; return e;
      case 'S': e.is_class = true, e.ranges = ascii_complement(space), e.multibyte = true; return e;
      case 'n': e.cp = '\n'; return e;
      case 't': e.cp = '\t'; return e;
      case 'r': e.cp = '\r'; return e;
      case 'f': e.cp = '\f'; return e;
      case 'v': e.cp = '\v'; return e;
      case '0': e.cp = 0; return e;
      case 'x': e.cp = hex(2); return e;
      case 'u': e.cp = hex(4); return e;
      case 'b':
      case 'B':
      case 'A':
      case 'Z':
      case 'z': --i_, fail("anchors and word boundaries are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') --i_, fail("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) --i_, fail("unknown escape");
    e.cp = uint8_t(c);  // escaped punctuation stands for itself
    return e;
  }

  Node char_class() {
    ++i_;  // '['
    bool negate = false;
    if (peek('^')) negate = true, ++i_;
    std::vector<std::pair<uint8_t, uint8_t>> ascii;
    std::vector<std::string> others;  // non-ASCII members
    bool multibyte = false;
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      std::string bytes;
      if (p_[i_] == '\\') {
        ++i_;
        Esc e = escape();
        if (e.is_class) {
          ascii.insert(ascii.end(), e.ranges.begin(), e.ranges.end());
          multibyte = multibyte || e.multibyte;
          continue;
        }
        lo = e.cp;
        io::json::append_utf8(bytes, lo);
      } else {
        lo = utf8_char(bytes);
      }
      uint32_t hi = lo;
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        std::string hb;
        if (p_[i_] == '\\') {
          ++i_;
          Esc e = escape();
          if (e.is_class) fail("a class escape cannot end a range");
          hi = e.cp;
        } else {
          hi = utf8_char(hb);
        }
        if (hi < lo) fail("a range out of order");
      }
      if (hi < 0x80) {
        ascii.push_back({uint8_t(lo), uint8_t(hi)});
      } else if (lo == hi) {
        others.push_back(bytes);
      } else {
        fail("ranges of non-ASCII characters are not supported");
      }
    }
    if (!peek(']')) fail("an unterminated character class");
    ++i_;
    if (negate) {
      if (!others.empty() || multibyte)
        fail("a negated class with non-ASCII members is not supported");
      return alt_of({set_of(ascii_complement(ascii)), any_multibyte()});
    }
    std::vector<Node> alts;
    if (!ascii.empty()) alts.push_back(set_of(ascii));
    for (const std::string& o : others) alts.push_back(bytes_of(o));
    if (multibyte) alts.push_back(any_multibyte());
    if (alts.empty()) fail("an empty character class");
    return alts.size() == 1 ? std::move(alts[0]) : alt_of(std::move(alts));
  }

  Node atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (peek('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          fail("lookaround and other (? groups are not supported");
        }
      }
      Node n = alternation();
      if (!peek(')')) fail("')' expected");
      ++i_;
      return n;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return alt_of({set_of({{0x00, 0x09}, {0x0B, 0x7F}}), any_multibyte()});
    }
    if (c == '\\') {
      ++i_;
      Esc e = escape();
      if (!e.is_class) {
        std::string b;
        io::json::append_utf8(b, e.cp);
        return bytes_of(b);
      }
      Node s = set_of(e.ranges);
      return e.multibyte ? alt_of({std::move(s), any_multibyte()}) : s;
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '^' || c == '$') fail("anchors are supported only at the ends");
    std::string bytes;
    utf8_char(bytes);
    return bytes_of(bytes);
  }

  std::string_view p_;
  size_t i_ = 0;
  Regex& re_;
};

int32_t Regex::add_nfa_state() {
  nfa_.emplace_back();
  return int32_t(nfa_.size() - 1);
}

std::shared_ptr<Regex> Regex::compile(std::string_view pattern) {
  auto re = std::make_shared<Regex>();
  re->pattern_ = std::string(pattern);
  re->describe_ = "the pattern '" + re->pattern_ + "'";
  RegexParser parser(pattern, *re);
  const Node root = parser.parse();
  auto [s, e] = parser.build(root);
  re->nfa_start_ = s;
  re->nfa_accept_ = e;
  re->intern({s});
  return re;
}

int32_t Regex::intern(std::vector<int32_t> set) {
  // Epsilon closure, sorted.
  std::vector<int32_t> stack(set.begin(), set.end());
  std::vector<char> seen(nfa_.size(), 0);
  set.clear();
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    if (seen[size_t(s)]) continue;
    seen[size_t(s)] = 1;
    set.push_back(s);
    for (int32_t t : nfa_[size_t(s)].eps) stack.push_back(t);
  }
  std::sort(set.begin(), set.end());
  auto it =
      std::lower_bound(index_.begin(), index_.end(), set,
                       [](const auto& a, const std::vector<int32_t>& b) { return a.first < b; });
  if (it != index_.end() && it->first == set) return it->second;
  DfaState d;
  d.nfa = set;
  d.accepting = std::binary_search(set.begin(), set.end(), nfa_accept_);
  d.next.assign(256, -2);
  dfa_.push_back(std::move(d));
  const int32_t id = int32_t(dfa_.size() - 1);
  index_.insert(it, {std::move(set), id});
  return id;
}

int32_t Regex::step(int32_t s, uint8_t b) {
  if (s < 0) return kDead;
  int32_t cached = dfa_[size_t(s)].next[b];
  if (cached != -2) return cached;
  std::vector<int32_t> moved;
  for (int32_t n : dfa_[size_t(s)].nfa)
    for (const Edge& e : nfa_[size_t(n)].edges)
      if (b >= e.lo && b <= e.hi) moved.push_back(e.to);
  const int32_t to = moved.empty() ? kDead : intern(std::move(moved));
  dfa_[size_t(s)].next[b] = to;
  return to;
}

bool Regex::accepting(int32_t s) { return s >= 0 && dfa_[size_t(s)].accepting; }

bool Regex::final(int32_t s) {
  if (s < 0) return true;
  if (!dfa_[size_t(s)].final_known) {
    bool any = false;
    for (int b = 0; b < 256 && !any; ++b) any = step(s, uint8_t(b)) >= 0;
    dfa_[size_t(s)].final = !any;
    dfa_[size_t(s)].final_known = true;
  }
  return dfa_[size_t(s)].final;
}

}  // namespace parley
