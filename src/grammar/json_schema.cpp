#include "grammar/json_schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "io/json_lite.h"

namespace parley {

namespace {

namespace json = io::json;
using json::Value;
using VKind = Value::Kind;

constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr int kMaxMergeDepth = 32;      // allOf/$ref merges inside one another
constexpr uint64_t kMaxCount = 100000;  // largest length/item count/regex repeat compiled
constexpr int kMaxSchemaDepth = 256;    // JSON nesting of the schema text

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::invalid_argument, "[json_schema] " + what);
}

std::string at(const std::string& ptr) { return " at " + (ptr.empty() ? "the root" : ptr); }

std::string pointer_child(const std::string& ptr, std::string_view seg) {
  std::string out = ptr + "/";
  for (char c : seg) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

std::string alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

// `e` as one postfix-able element: parenthesized unless it is one literal, class or name.
std::string group(const std::string& e) {
  bool atom;
  if (e.front() == '"') {  // a literal: its closing quote (the first unescaped one) ends e
    size_t i = 1;
    while (i < e.size() && e[i] != '"') i += e[i] == '\\' ? 2 : 1;
    atom = i == e.size() - 1;
  } else if (e.front() == '[') {  // our classes write ']' inside as \x5D
    atom = e.find(']') == e.size() - 1;
  } else {
    atom = e.find_first_of(" |()*+?{") == std::string::npos;
  }
  return atom ? e : "( " + e + " )";
}

std::string repeat_suffix(uint64_t lo, std::optional<uint64_t> hi) {
  if (!hi) return lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}";
  if (lo == 0 && *hi == 1) return "?";
  if (lo == *hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
}

// e{lo,hi}; "" when nothing may repeat. Counts above the GBNF parser's limit (1000) are
// written in blocks of 1000 without ambiguity: e{0,m} = (e{1000}){0,q-1} e{0,999} |
// (e{1000}){q} e{0,r} for m = 1000q + r.
std::string repeated(const std::string& e, uint64_t lo, std::optional<uint64_t> hi) {
  constexpr uint64_t kBlock = 1000;
  if (e.empty() || (hi && *hi == 0)) return "";
  if (lo == 1 && hi && *hi == 1) return e;
  if (lo <= kBlock && (!hi || *hi <= kBlock)) return group(e) + repeat_suffix(lo, hi);
  const std::string block = group(e) + "{1000}";
  std::string fixed;  // e{lo}
  if (lo >= kBlock)
    fixed =
        join({repeated(block, lo / kBlock, lo / kBlock), repeated(e, lo % kBlock, lo % kBlock)});
  else
    fixed = repeated(e, lo, lo);
  if (!hi) return join({fixed, group(e) + "*"});
  const uint64_t m = *hi - lo, q = m / kBlock, r = m % kBlock;
  if (m <= kBlock) return join({fixed, repeated(e, 0, m)});
  const std::string below = join({repeated(block, 0, q - 1), repeated(e, 0, kBlock - 1)});
  const std::string top = join({repeated(block, q, q), repeated(e, 0, r)});
  return join({fixed, "( " + below + " | " + top + " )"});
}

std::string hex_digit(uint32_t v) { return std::string(1, "0123456789ABCDEF"[v & 15]); }

// ---- GBNF literals and classes ----------------------------------------------------------

std::string lit(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = uint8_t(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += "\\x" + hex_digit(c >> 4) + hex_digit(c);
        else
          out += ch;
    }
  }
  return out + "\"";
}

// A set of code points: sorted, disjoint, non-adjacent inclusive ranges.
using CpSet = std::vector<std::pair<uint32_t, uint32_t>>;

CpSet normalized(CpSet s) {
  std::sort(s.begin(), s.end());
  CpSet out;
  for (auto r : s) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

CpSet complement(const CpSet& s) {
  CpSet out;
  uint32_t next = 0;
  for (auto [lo, hi] : s) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return out;
}

CpSet intersect(const CpSet& a, const CpSet& b) {
  CpSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint32_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) out.push_back({lo, hi});
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return out;
}

CpSet subtract(const CpSet& a, const CpSet& b) { return intersect(a, complement(b)); }
CpSet unite(CpSet a, const CpSet& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalized(std::move(a));
}

std::string class_char(uint32_t c) {
  if (c < 0x80) {
    if (c < 0x20 || c == 0x7f || c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' ||
        c == '"')
      return "\\x" + hex_digit(c >> 4) + hex_digit(c);
    return std::string(1, char(c));
  }
  std::string out;
  json::append_utf8(out, c);
  return out;
}

// A class matching the code points of `s` (non-empty): `[...]` or `[^...]`, whichever is
// shorter; surrogates never occur in UTF-8 text, so either side may take them.
std::string gbnf_class(const CpSet& s) {
  const CpSet surrogates{{0xD800, 0xDFFF}};
  auto smaller = [&](const CpSet& x) {
    CpSet with = unite(x, surrogates), without = subtract(x, surrogates);
    return with.size() < without.size() ? with : without;
  };
  const CpSet pos = smaller(s), neg = smaller(complement(s));
  const bool negated = neg.size() <= pos.size();
  std::string out = negated ? "[^" : "[";
  for (auto [lo, hi] : negated ? neg : pos) {
    if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;  // no surrogate ends: UTF-8 cannot write them
    if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
    if (lo > hi) continue;
    out += class_char(lo);
    if (hi == lo + 1) out += class_char(hi);
    if (hi > lo + 1) out += "-" + class_char(hi);
  }
  return out + "]";
}

// The code points JSON text must escape inside a string (and U+007F, which llguidance does).
const CpSet kEscaped{{0x00, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}, {0x7F, 0x7F}};

std::string utf8_of(uint32_t cp) {
  std::string s;
  json::append_utf8(s, cp);
  return s;
}

std::vector<uint32_t> decode_utf8(std::string_view s) {  // s is valid UTF-8 (json_lite checks)
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
    for (int k = 1; k < len && i + size_t(k) < s.size(); ++k)
      cp = (cp << 6) | (uint8_t(s[i + size_t(k)]) & 0x3Fu);
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

// The JSON string text of `s` without quotes: json::quote's escapes, U+007F as \u007f.
std::string json_quoted(std::string_view s) {
  std::string q = json::quote(s), out;
  for (char c : q) out += c == '\x7f' ? std::string("\\u007f") : std::string(1, c);
  return out;
}

// ---- JSON values: canonical text and decimal numbers ------------------------------------

// A decimal number: sign, integer digits without leading zeros ("0" for zero), fraction
// digits without trailing zeros. Zero is never negative.
struct Dec {
  bool neg = false;
  std::string ip = "0", fp;
  std::string text() const { return (neg ? "-" : "") + ip + (fp.empty() ? "" : "." + fp); }
  bool integral() const { return fp.empty(); }
  bool zero() const { return ip == "0" && fp.empty(); }
};

Dec parse_dec(std::string_view t) {
  Dec d;
  if (!t.empty() && t[0] == '-') {
    d.neg = true;
    t.remove_prefix(1);
  }
  const size_t dot = t.find('.');
  std::string ip(t.substr(0, dot)), fp(dot == std::string_view::npos ? "" : t.substr(dot + 1));
  ip.erase(0, std::min(ip.find_first_not_of('0'), ip.size()));
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  d.ip = ip.empty() ? "0" : ip;
  d.fp = fp;
  if (d.zero()) d.neg = false;
  return d;
}

Dec dec_of(const Value& v, const std::string& what) {
  if (!v.is(VKind::number)) fail(what + " must be a number");
  if (auto i = v.as_int64()) return parse_dec(std::to_string(*i));
  if (auto u = v.as_uint64()) return parse_dec(std::to_string(*u));
  const double d = v.as_double();
  if (!std::isfinite(d)) fail(what + " is out of range");
  char buf[512];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  if (r.ec != std::errc()) fail(what + " is out of range");
  return parse_dec(std::string_view(buf, size_t(r.ptr - buf)));
}

int cmp_mag(const Dec& a, const Dec& b) {
  if (a.ip.size() != b.ip.size()) return a.ip.size() < b.ip.size() ? -1 : 1;
  if (int c = a.ip.compare(b.ip)) return c < 0 ? -1 : 1;
  if (int c = a.fp.compare(b.fp)) return c < 0 ? -1 : 1;
  return 0;
}

int cmp(const Dec& a, const Dec& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  return a.neg ? -cmp_mag(a, b) : cmp_mag(a, b);
}

Dec negated(Dec d) {
  if (!d.zero()) d.neg = !d.neg;
  return d;
}

std::string inc_digits(std::string s) {  // s + 1, s a canonical non-negative integer
  int i = int(s.size()) - 1;
  while (i >= 0 && s[size_t(i)] == '9') s[size_t(i--)] = '0';
  if (i < 0) return "1" + s;
  ++s[size_t(i)];
  return s;
}

std::string dec_digits(std::string s) {  // s - 1, s a canonical positive integer
  int i = int(s.size()) - 1;
  while (s[size_t(i)] == '0') s[size_t(i--)] = '9';
  --s[size_t(i)];
  if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
  return s;
}

Dec int_plus_one(const Dec& d) {  // d integral
  if (!d.neg) return {false, inc_digits(d.ip), ""};
  return negated(Dec{false, dec_digits(d.ip), ""});
}
Dec int_minus_one(const Dec& d) { return negated(int_plus_one(negated(d))); }
Dec floor_of(const Dec& d) {
  if (d.integral()) return d;
  return d.neg ? Dec{true, inc_digits(d.ip), ""} : Dec{false, d.ip, ""};
}
Dec ceil_of(const Dec& d) {
  if (d.integral()) return d;
  return d.neg ? negated(Dec{false, d.ip, ""}) : Dec{false, inc_digits(d.ip), ""};
}

// Compact canonical JSON text (equality of enum values, literals).
std::string canonical(const Value& v) {
  switch (v.kind()) {
    case VKind::null: return "null";
    case VKind::boolean: return v.as_bool() ? "true" : "false";
    case VKind::number: return dec_of(v, "a number").text();
    case VKind::string: return json_quoted(v.as_string());
    case VKind::array: {
      std::string out = "[";
      for (const Value& e : v.as_array()) out += (out.size() > 1 ? "," : "") + canonical(e);
      return out + "]";
    }
    case VKind::object: {
      std::string out = "{";
      for (const auto& [k, e] : v.as_object())
        out += (out.size() > 1 ? "," : "") + json_quoted(k) + ":" + canonical(e);
      return out + "}";
    }
  }
  return "";
}

// ---- numeric ranges as digit grammars ---------------------------------------------------

std::string digits(uint64_t n) { return repeated("[0-9]", n, n); }

// L-digit strings (digits of equal length L) from a to b, a <= b.
std::string same_length_range(std::string_view a, std::string_view b) {
  if (a == b) return a.empty() ? "" : lit(a);
  size_t common = 0;
  while (a[common] == b[common]) ++common;
  if (common > 0)
    return join({lit(a.substr(0, common)), same_length_range(a.substr(common), b.substr(common))});
  const size_t n = a.size() - 1;
  const bool a_zeros = a.find_first_not_of('0', 1) == std::string_view::npos;
  const bool b_nines = b.find_first_not_of('9', 1) == std::string_view::npos;
  std::vector<std::string> alts;
  if (!a_zeros)
    alts.push_back(
        join({lit(a.substr(0, 1)), same_length_range(a.substr(1), std::string(n, '9'))}));
  const char lo = a_zeros ? a[0] : char(a[0] + 1), hi = b_nines ? b[0] : char(b[0] - 1);
  if (lo <= hi) {
    const std::string cls =
        lo == hi ? lit(std::string(1, lo)) : std::string("[") + lo + "-" + hi + "]";
    alts.push_back(join({cls, digits(n)}));
  }
  if (!b_nines) {
    const std::string zeros(n, '0');
    alts.push_back(zeros == b.substr(1)
                       ? lit(b)
                       : join({lit(b.substr(0, 1)), same_length_range(zeros, b.substr(1))}));
  }
  return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
}

// Canonical non-negative integers (no leading zeros) in [lo, hi], hi absent: unbounded.
std::string uint_range(const std::string& lo, const std::optional<std::string>& hi) {
  std::vector<std::string> alts;
  const size_t last = hi ? hi->size() : lo.size();
  for (size_t len = lo.size(); len <= last; ++len) {
    const std::string a = len == lo.size() ? lo : "1" + std::string(len - 1, '0');
    const std::string b = hi && len == hi->size() ? *hi : std::string(len, '9');
    alts.push_back(same_length_range(a, b));
  }
  if (!hi) alts.push_back(join({"[1-9]", repeated("[0-9]", lo.size(), std::nullopt)}));
  return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
}

// Integers in [lo, hi] (each integral, absent: unbounded), lo <= hi.
std::string int_range(const std::optional<Dec>& lo, const std::optional<Dec>& hi) {
  std::vector<std::string> alts;
  if (!hi || !hi->neg)
    alts.push_back(
        uint_range(lo && !lo->neg ? lo->ip : "0", hi ? std::optional(hi->ip) : std::nullopt));
  if (!lo || lo->neg) {
    // llguidance takes "-0" exactly when both bounds are finite around zero; so do we.
    const std::string mag_lo = hi && hi->neg ? hi->ip : (lo && hi) ? "0" : "1";
    alts.push_back(join({"\"-\"", uint_range(mag_lo, lo ? std::optional(lo->ip) : std::nullopt)}));
  }
  return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
}

// Fraction digit strings f (after the '.') with l <(=) f <(=) h as decimal fractions (l, h
// without trailing zeros, h absent: no upper bound). `nonempty` is the grammar of the
// non-empty such strings (absent: none), `empty` whether f = "" (the value 0) qualifies.
struct FracGrammar {
  std::optional<std::string> nonempty;
  bool empty = false;
};

std::string optional_part(const FracGrammar& g) {  // f, possibly empty, as one element
  if (!g.empty) return *g.nonempty;
  if (*g.nonempty == "[0-9]+" || *g.nonempty == "\"0\"+")
    return g.nonempty->substr(0, g.nonempty->size() - 1) + "*";
  return "( " + *g.nonempty + " )?";
}

FracGrammar frac_range(std::string_view l, bool l_excl, std::optional<std::string_view> h,
                       bool h_excl) {
  FracGrammar g;
  g.empty = l.empty() && !l_excl && !(h && h->empty() && h_excl);
  if (l.empty() && !h) {
    g.nonempty = l_excl ? "\"0\"* [1-9] [0-9]*" : "[0-9]+";
    return g;
  }
  if (l.empty() && h->empty()) {
    if (!l_excl && !h_excl) g.nonempty = "\"0\"+";
    return g;
  }
  const int l0 = l.empty() ? 0 : l[0] - '0';
  const int h0 = !h ? 10 : h->empty() ? 0 : (*h)[0] - '0';
  const std::string_view lrest = l.empty() ? l : l.substr(1);
  const std::optional<std::string_view> hrest =
      h ? std::optional(h->empty() ? *h : h->substr(1)) : std::nullopt;
  std::vector<std::string> alts;
  auto digit_then = [&](int d, const FracGrammar& rest) {
    const std::string dl = lit(std::string(1, char('0' + d)));
    if (rest.nonempty)
      alts.push_back(join({dl, optional_part(rest)}));
    else if (rest.empty)
      alts.push_back(dl);
  };
  if (h && l0 == h0) {
    digit_then(l0, frac_range(lrest, l_excl, hrest, h_excl));
  } else {
    digit_then(l0, frac_range(lrest, l_excl, std::nullopt, false));
    if (l0 + 1 <= h0 - 1 && l0 + 1 <= 9) {
      const int top = std::min(h0 - 1, 9);
      const std::string cls = l0 + 1 == top
                                  ? lit(std::string(1, char('0' + top)))
                                  : "[" + std::to_string(l0 + 1) + "-" + std::to_string(top) + "]";
      alts.push_back(join({cls, "[0-9]*"}));
    }
    if (h && h0 <= 9) digit_then(h0, frac_range("", false, hrest, h_excl));
  }
  if (!alts.empty()) g.nonempty = alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
  return g;
}

// The optional ".digits" part after an integer part: std::nullopt when nothing qualifies.
std::optional<std::string> fraction_part(const FracGrammar& g) {
  if (!g.nonempty) return g.empty ? std::optional<std::string>("") : std::nullopt;
  const std::string dotted = join({"\".\"", *g.nonempty});
  return g.empty ? "( " + dotted + " )?" : dotted;
}

struct Bound {
  Dec v;
  bool excl = false;
};

// Non-negative decimals m (no exponent, any fraction digits) with lo <(=) m <(=) hi.
std::optional<std::string> magnitude_range(const Bound& lo, const std::optional<Bound>& hi) {
  std::vector<std::string> alts;
  auto add = [&](const std::string& int_part, const std::optional<std::string>& frac) {
    if (frac) alts.push_back(join({int_part, *frac}));
  };
  if (hi && hi->v.ip == lo.v.ip) {
    add(lit(lo.v.ip),
        fraction_part(frac_range(lo.v.fp, lo.excl, std::string_view(hi->v.fp), hi->excl)));
  } else {
    add(lit(lo.v.ip), fraction_part(frac_range(lo.v.fp, lo.excl, std::nullopt, false)));
    const std::string next = inc_digits(lo.v.ip);
    if (!hi || cmp_mag(Dec{false, next, ""}, Dec{false, hi->v.ip, ""}) < 0)
      add(uint_range(next, hi ? std::optional(dec_digits(hi->v.ip)) : std::nullopt),
          "( \".\" [0-9]+ )?");
    if (hi)
      add(lit(hi->v.ip),
          fraction_part(frac_range("", false, std::string_view(hi->v.fp), hi->excl)));
  }
  if (alts.empty()) return std::nullopt;
  return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
}

// Decimals (no exponent) between the bounds; std::nullopt when none.
std::optional<std::string> number_range(const std::optional<Bound>& lo,
                                        const std::optional<Bound>& hi) {
  if (lo && hi) {
    const int c = cmp(lo->v, hi->v);
    if (c > 0 || (c == 0 && (lo->excl || hi->excl))) return std::nullopt;
  }
  std::vector<std::string> alts;
  const Bound zero{};
  if (!hi || !hi->v.neg) {  // written without '-'
    const Bound mlo = lo && !lo->v.neg ? *lo : zero;
    if (!(hi && hi->v.zero() && (hi->excl || mlo.excl)))
      if (auto e = magnitude_range(mlo, hi)) alts.push_back(*e);
  }
  if (!lo || lo->v.neg) {  // '-' and a magnitude above zero
    const Bound mlo = hi && hi->v.neg ? Bound{negated(hi->v), hi->excl} : Bound{Dec{}, true};
    const std::optional<Bound> mhi =
        lo ? std::optional(Bound{negated(lo->v), lo->excl}) : std::nullopt;
    if (auto e = magnitude_range(mlo, mhi)) alts.push_back(join({"\"-\"", *e}));
  }
  if (alts.empty()) return std::nullopt;
  return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
}

// ---- the grammar's rules ----------------------------------------------------------------

// Rules in the order they were made (`root` printed first); equal bodies share one rule.
class RuleSet {
 public:
  explicit RuleSet(const std::set<std::string, std::less<>>& reserved)
      : names_(reserved.begin(), reserved.end()) {}

  std::string reserve(std::string_view hint) {
    std::string base;
    for (char c : hint) {
      const bool ok = std::isalnum(uint8_t(c)) != 0 && uint8_t(c) < 0x80;
      if (ok)
        base += c;
      else if (!base.empty() && base.back() != '-')
        base += '-';
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.size() > 40) base.resize(40);
    if (base.empty()) base = "r";
    std::string name = base;
    for (int i = 2; names_.count(name) != 0; ++i) name = base + "-" + std::to_string(i);
    names_.insert(name);
    return name;
  }
  void define(const std::string& name, const std::string& body) { rules_.push_back({name, body}); }
  // The rule with this body (made on first use).
  std::string add(std::string_view hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    std::string name = reserve(hint);
    define(name, body);
    by_body_.emplace(body, name);
    return name;
  }
  std::string text() const {
    std::string root, rest;
    for (const auto& [name, body] : rules_)
      (name == "root" ? root : rest) += name + " ::= " + body + "\n";
    return root + rest;
  }

 private:
  std::set<std::string> names_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
};

// ---- regular expressions (the `pattern` keyword and formats) ----------------------------

struct Re {
  enum Kind { chars, seq, alt, repeat, bol, eol } kind = seq;
  CpSet set;             // chars
  std::vector<Re> kids;  // seq, alt, repeat (one)
  uint64_t min = 0;      // repeat
  std::optional<uint64_t> max;
};

// One top-level alternative of a pattern and whether `^` / `$` anchor it.
struct PatternAlternative {
  Re body;
  bool start = false, end = false;
};

const CpSet kDigit{{'0', '9'}};
const CpSet kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMA-262's classes (as llguidance): \d and \w ASCII, \s Unicode White_Space.
const CpSet kSpace{{0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
                   {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                   {0x205F, 0x205F}, {0x3000, 0x3000}};

// Recursive descent over the pattern's code points.
class PatternParser {
 public:
  PatternParser(std::string_view pattern, std::string ptr)
      : p_(decode_utf8(pattern)), text_(pattern), ptr_(std::move(ptr)) {}

  std::vector<PatternAlternative> parse() {
    Re top = alternation();
    if (i_ < p_.size()) error("unbalanced ')'");
    std::vector<Re> alts;
    if (top.kind == Re::alt)
      alts = std::move(top.kids);
    else
      alts.push_back(std::move(top));
    std::vector<PatternAlternative> out;
    for (Re& r : alts) {
      PatternAlternative a;
      if (r.kind == Re::bol || r.kind == Re::eol) {
        (r.kind == Re::bol ? a.start : a.end) = true;
        r = Re{};
      }
      if (r.kind == Re::seq) {
        auto& k = r.kids;
        while (!k.empty() && k.front().kind == Re::bol) a.start = true, k.erase(k.begin());
        while (!k.empty() && k.back().kind == Re::eol) a.end = true, k.pop_back();
      }
      check_no_anchor(r);
      a.body = std::move(r);
      out.push_back(std::move(a));
    }
    return out;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("pattern '" + text_ + "': " + what + " (character " + std::to_string(i_) + ")" + at(ptr_));
  }
  bool peek(uint32_t c) const { return i_ < p_.size() && p_[i_] == c; }
  void check_no_anchor(const Re& r) const {
    if (r.kind == Re::bol || r.kind == Re::eol)
      fail("pattern '" + text_ + "': an anchor inside the pattern is not supported" + at(ptr_));
    for (const Re& k : r.kids) check_no_anchor(k);
  }

  Re alternation() {
    std::vector<Re> alts{sequence()};
    while (peek('|')) {
      ++i_;
      alts.push_back(sequence());
    }
    if (alts.size() == 1) return std::move(alts[0]);
    Re r;
    r.kind = Re::alt;
    r.kids = std::move(alts);
    return r;
  }

  Re sequence() {
    Re r;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') r.kids.push_back(quantified());
    return r;
  }

  uint64_t number() {
    uint64_t v = 0;
    const size_t from = i_;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9' && v <= kMaxCount)
      v = v * 10 + (p_[i_++] - '0');
    if (i_ == from) error("a number was expected");
    if (v > kMaxCount) error("a repeat count above " + std::to_string(kMaxCount));
    return v;
  }

  bool brace_quantifier_ahead() const {  // {n}, {n,}, {n,m}
    size_t j = i_ + 1;
    auto digits = [&] {
      const size_t d = j;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') ++j;
      return j > d;
    };
    if (!digits()) return false;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      digits();
    }
    return j < p_.size() && p_[j] == '}';
  }

  Re quantified() {
    Re a = atom();
    for (;;) {
      uint64_t lo = 0;
      std::optional<uint64_t> hi;
      if (peek('*')) {
        ++i_;
      } else if (peek('+')) {
        ++i_, lo = 1;
      } else if (peek('?')) {
        ++i_, hi = 1;
      } else if (peek('{') && brace_quantifier_ahead()) {
        ++i_;
        lo = number();
        hi = lo;
        if (peek(',')) {
          ++i_;
          hi = peek('}') ? std::nullopt : std::optional(number());
        }
        ++i_;  // '}'
        if (hi && *hi < lo) error("a repeat {n,m} with m < n");
      } else {
        return a;
      }
      if (a.kind == Re::bol || a.kind == Re::eol) error("a repeated anchor");
      if (peek('?')) ++i_;  // lazy: the same language
      if (peek('+')) error("a possessive quantifier");
      Re r;
      r.kind = Re::repeat;
      r.min = lo;
      r.max = hi;
      r.kids.push_back(std::move(a));
      a = std::move(r);
    }
  }

  static Re anchor(Re::Kind k) {
    Re r;
    r.kind = k;
    return r;
  }

  static Re chars(CpSet s) {
    Re r;
    r.kind = Re::chars;
    r.set = normalized(std::move(s));
    return r;
  }

  Re atom() {
    const uint32_t c = p_[i_++];
    switch (c) {
      case '(': {
        if (peek('?')) {
          ++i_;
          if (peek(':')) {
            ++i_;
          } else if (peek('P') || peek('<')) {
            if (peek('P')) ++i_;
            if (!peek('<')) error("an unsupported group");
            ++i_;
            if (peek('=') || peek('!')) error("lookbehind");
            while (i_ < p_.size() && p_[i_] != '>') ++i_;
            if (i_ == p_.size()) error("an unterminated group name");
            ++i_;
          } else if (peek('=') || peek('!')) {
            error("lookahead");
          } else {
            error("inline flags");
          }
        }
        Re inner = alternation();
        if (!peek(')')) error("unbalanced '('");
        ++i_;
        return inner;
      }
      case '[': return chars(char_class());
      case '.': return chars(complement({{'\n', '\n'}}));
      case '^': return anchor(Re::bol);
      case '$': return anchor(Re::eol);
      case '\\': return chars(escape(false));
      case '*':
      case '+':
      case '?': {
        --i_;
        error("nothing to repeat");
      }
      default: return chars({{c, c}});
    }
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const uint32_t d = i_ < p_.size() ? p_[i_] : 0;
      const uint32_t lower = d | 0x20;
      if (d >= '0' && d <= '9')
        v = v * 16 + (d - '0');
      else if (lower >= 'a' && lower <= 'f')
        v = v * 16 + (lower - 'a' + 10);
      else
        error("a hex digit was expected");
      ++i_;
    }
    return v;
  }

  CpSet escape(bool in_class) {
    if (i_ >= p_.size()) error("a trailing backslash");
    const uint32_t c = p_[i_++];
    switch (c) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{0x0C, 0x0C}};
      case 'v': return {{0x0B, 0x0B}};
      case '0': return {{0, 0}};
      case 'x': {
        const uint32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        uint32_t v = 0;
        if (peek('{')) {
          ++i_;
          while (i_ < p_.size() && !peek('}')) v = v * 16 + hex(1);
          if (!peek('}') || v > kMaxCp) error("a bad \\u{...} escape");
          ++i_;
        } else {
          v = hex(4);
        }
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{0x08, 0x08}};
        --i_;
        error("a word boundary \\b");
      default: break;
    }
    if (c >= '1' && c <= '9') {
      --i_;
      error("a backreference");
    }
    if (c < 0x80 && std::isalnum(int(c))) {
      --i_;
      error("the escape \\" + std::string(1, char(c)));
    }
    return {{c, c}};
  }

  CpSet char_class() {
    const bool negate = peek('^');
    if (negate) ++i_;
    CpSet set;
    for (bool first = true;; first = false) {
      if (i_ >= p_.size()) error("an unterminated class");
      if (p_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      if (p_[i_] == '[' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') error("a POSIX class");
      CpSet item = class_atom();
      if (item.size() == 1 && item[0].first == item[0].second && peek('-') && i_ + 1 < p_.size() &&
          p_[i_ + 1] != ']') {
        ++i_;
        const CpSet hi = class_atom();
        if (hi.size() != 1 || hi[0].first != hi[0].second || hi[0].first < item[0].first)
          error("a bad class range");
        item = {{item[0].first, hi[0].first}};
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    set = normalized(std::move(set));
    return negate ? complement(set) : set;
  }

  CpSet class_atom() {
    const uint32_t c = p_[i_++];
    if (c == '\\') return escape(true);
    return {{c, c}};
  }

  std::vector<uint32_t> p_;
  std::string text_, ptr_;
  size_t i_ = 0;
};

// The lengths (in characters) of the texts r matches: min, max (absent: unbounded).
std::pair<uint64_t, std::optional<uint64_t>> length_bounds(const Re& r) {
  constexpr uint64_t kBig = uint64_t(1) << 50;
  auto cap = [&](uint64_t v) { return std::min(v, kBig); };
  switch (r.kind) {
    case Re::chars: return {1, 1};
    case Re::bol:
    case Re::eol: return {0, 0};
    case Re::seq: {
      uint64_t lo = 0;
      std::optional<uint64_t> hi = 0;
      for (const Re& k : r.kids) {
        auto [klo, khi] = length_bounds(k);
        lo = cap(lo + klo);
        hi = hi && khi ? std::optional(cap(*hi + *khi)) : std::nullopt;
      }
      return {lo, hi};
    }
    case Re::alt: {
      uint64_t lo = kBig;
      std::optional<uint64_t> hi = 0;
      for (const Re& k : r.kids) {
        auto [klo, khi] = length_bounds(k);
        lo = std::min(lo, klo);
        hi = hi && khi ? std::optional(std::max(*hi, *khi)) : std::nullopt;
      }
      return {lo, hi};
    }
    case Re::repeat: {
      auto [klo, khi] = length_bounds(r.kids[0]);
      std::optional<uint64_t> hi;
      if (r.max && *r.max == 0)
        hi = 0;
      else if (r.max && khi)
        hi = cap(*khi * *r.max);
      return {cap(klo * r.min), hi};
    }
  }
  return {0, 0};
}

// The formats, as patterns matched whole (RFC 3339 date/time, RFC 4122 uuid, RFC 1123
// hostname, RFC 5321 dot-atom email).
std::optional<std::string> format_pattern(std::string_view format) {
  static const std::string kDate =
      "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|"
      "30)|02-(?:0[1-9]|[12][0-9]))";
  static const std::string kTime =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-"
      "3]):"
      "[0-5][0-9])";
  static const std::string kLabel = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
  static const std::string kHost = kLabel + "(?:\\." + kLabel + ")*";
  static const std::string kMailLabel = "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?";
  static const std::string kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  static const std::string kIpv4 = kOctet + "(?:\\." + kOctet + "){3}";
  static const std::string kAtom = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+";
  static const std::map<std::string, std::string, std::less<>> kFormats = {
      {"date", kDate},
      {"time", kTime},
      {"date-time", kDate + "[Tt]" + kTime},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"ipv4", kIpv4},
      {"hostname", kHost},
      // The domain's labels unbounded in length, as llguidance writes it.
      {"email", kAtom + "(?:\\." + kAtom + ")*@(?:" + kMailLabel + "(?:\\." + kMailLabel +
                    ")*|\\[" + kIpv4 + "\\])"},
  };
  auto it = kFormats.find(format);
  if (it == kFormats.end()) return std::nullopt;
  return "^(?:" + it->second + ")$";
}

// ---- the schema compiler ----------------------------------------------------------------

const std::set<std::string, std::less<>> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema", "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "strict"};
const std::set<std::string, std::less<>> kObjectKeys = {"properties", "required",
                                                        "additionalProperties"};
const std::set<std::string, std::less<>> kArrayKeys = {"items", "prefixItems", "additionalItems",
                                                       "minItems", "maxItems"};
const std::set<std::string, std::less<>> kStringKeys = {"minLength", "maxLength", "pattern",
                                                        "format"};
const std::set<std::string, std::less<>> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum",
                                                        "exclusiveMaximum"};
const std::set<std::string, std::less<>> kOtherKeys = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"};
const std::set<std::string, std::less<>> kPrimitiveRules = {
    "root", "value",  "object",  "array",   "string", "char", "esc",     "pchar",
    "pesc", "number", "integer", "boolean", "null",   "ws",   "key-rest"};

bool is_annotation(std::string_view k) {
  return kAnnotations.count(k) != 0 || k.substr(0, 2) == "x-";
}
bool is_keyword(std::string_view k) {
  return kObjectKeys.count(k) || kArrayKeys.count(k) || kStringKeys.count(k) ||
         kNumberKeys.count(k) || kOtherKeys.count(k);
}
// A keyword that constrains the value (not an annotation or a definitions table).
bool constrains(std::string_view k) {
  return !is_annotation(k) && k != "$defs" && k != "definitions";
}

void check_keywords(const Value& s, const std::string& ptr) {
  for (const auto& [k, v] : s.as_object())
    if (!is_annotation(k) && !is_keyword(k)) fail("unsupported keyword '" + k + "'" + at(ptr));
}

bool has_constraints_besides(const Value& s, std::string_view except) {
  for (const auto& [k, v] : s.as_object())
    if (constrains(k) && k != except) return true;
  return false;
}

Value without(const Value& s, std::initializer_list<std::string_view> keys) {
  json::Object out;
  for (const auto& [k, v] : s.as_object())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) out.emplace_back(k, v);
  return Value(std::move(out));
}

std::string hint_of(const std::string& ptr) {
  std::string out;
  size_t i = 0;
  while (i < ptr.size()) {
    const size_t j = std::min(ptr.find('/', i + 1), ptr.size());
    const std::string seg = ptr.substr(i + 1, j - i - 1);
    if (seg != "properties" && seg != "$defs" && seg != "definitions" && !seg.empty())
      out += (out.empty() ? "" : "-") + seg;
    i = j;
  }
  return out.empty() ? "top" : out;
}

// The JSON types a schema's "type" allows (all when absent).
struct Types {
  bool null = true, boolean = true, object = true, array = true, string = true, number = true,
       integer = true;
};

Types types_of(const Value& s, const std::string& ptr) {
  const Value* t = s.find("type");
  if (!t) return {};
  Types out{false, false, false, false, false, false, false};
  auto add = [&](const Value& name) {
    if (!name.is(VKind::string)) fail("'type' must be a string or an array of strings" + at(ptr));
    const std::string& n = name.as_string();
    if (n == "null")
      out.null = true;
    else if (n == "boolean")
      out.boolean = true;
    else if (n == "object")
      out.object = true;
    else if (n == "array")
      out.array = true;
    else if (n == "string")
      out.string = true;
    else if (n == "number")
      out.number = out.integer = true;
    else if (n == "integer")
      out.integer = true;
    else
      fail("unknown type '" + n + "'" + at(ptr));
  };
  if (t->is(VKind::array)) {
    for (const Value& n : t->as_array()) add(n);
  } else {
    add(*t);
  }
  return out;
}

bool value_has_type(const Value& v, const Types& t) {
  switch (v.kind()) {
    case VKind::null: return t.null;
    case VKind::boolean: return t.boolean;
    case VKind::string: return t.string;
    case VKind::array: return t.array;
    case VKind::object: return t.object;
    case VKind::number: return t.number || (t.integer && dec_of(v, "a number").integral());
  }
  return false;
}

std::optional<uint64_t> count_of(const Value& s, const char* key, const std::string& ptr) {
  const Value* v = s.find(key);
  if (!v) return std::nullopt;
  const std::optional<uint64_t> n = v->is(VKind::number) ? v->as_uint64() : std::nullopt;
  if (!n) fail("'" + std::string(key) + "' must be a non-negative integer" + at(ptr));
  if (*n > kMaxCount)
    fail("'" + std::string(key) + "' " + std::to_string(*n) + " is above the supported " +
         std::to_string(kMaxCount) + at(ptr));
  return n;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Value& root, const JsonSchemaOptions& opt)
      : root_(root), opt_(opt), rules_(kPrimitiveRules) {
    check_arg(opt.max_whitespace >= 0, "[json_schema] max_whitespace must be >= 0");
  }

  std::string run() {
    ref_rules_["#"] = "root";
    ref_text_["root"] = "#";
    const std::optional<std::string> body = compile(root_, Ctx{"", "root"});
    if (!body) fail("the schema accepts no JSON value");
    rules_.define("root", *body);
    check_head_cycles();
    return rules_.text();
  }

 private:
  // Where a subschema is compiled: its JSON pointer, and the $ref rule whose first byte it
  // is ("" when bytes come before it), to find left recursion.
  struct Ctx {
    std::string ptr, head;
  };

  std::string ws() { return opt_.max_whitespace > 0 ? use("ws") : ""; }
  std::string sep() { return join({ws(), lit(","), ws()}); }
  std::string colon() { return join({ws(), lit(":"), ws()}); }

  // The shared primitive rules, made on first use.
  std::string use(std::string_view name) {
    if (!opt_.unicode_escapes && (name == "pchar" || name == "pesc")) return use(name.substr(1));
    if (!made_.insert(std::string(name)).second) return std::string(name);
    const std::string hex = "[0-9a-fA-F]";
    const std::string short_escapes = gbnf_class(
        {{'"', '"'}, {'\\', '\\'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}});
    std::string body;
    if (name == "value") {
      body = alternatives(
          {use("object"), use("array"), use("string"), use("number"), use("boolean"), use("null")});
    } else if (name == "object") {
      const std::string kv = join({use("string"), colon(), use("value")});
      body = join({lit("{"), ws(), "(", kv, "(", sep(), kv, ")*", ws(), ")?", lit("}")});
    } else if (name == "array") {
      body = join({lit("["), ws(), "(", use("value"), "(", sep(), use("value"), ")*", ws(), ")?",
                   lit("]")});
    } else if (name == "string") {
      body = join({lit("\""), use("char") + "*", lit("\"")});
    } else if (name == "char" || name == "pchar") {
      body = gbnf_class(complement(kEscaped)) + " | " + lit("\\") + " " +
             use(name == "char" ? "esc" : "pesc");
    } else if (name == "pesc" || (name == "esc" && !opt_.unicode_escapes)) {
      body = short_escapes + " | \"u00\" [01] " + hex + " | \"u007\" [fF]";
    } else if (name == "esc") {
      body = short_escapes + " | \"u\" ( [0-9a-cA-Ce-fE-F] " + hex + "{3} | [dD] [0-7] " + hex +
             "{2} | [dD] [89abAB] " + hex + "{2} \"\\\\u\" [dD] [c-fC-F] " + hex + "{2} )";
    } else if (name == "number") {
      body =
          "\"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] ( \"+\" | \"-\" )? [0-9]+ )?";
    } else if (name == "integer") {
      body = "\"-\"? ( \"0\" | [1-9] [0-9]* )";
    } else if (name == "boolean") {
      body = "\"true\" | \"false\"";
    } else if (name == "null") {
      body = "\"null\"";
    } else if (name == "ws") {
      body = repeated("[ \\t\\n]", 0, uint64_t(opt_.max_whitespace));
    } else if (name == "key-rest") {
      body = join({use("pchar") + "*", lit("\"")});
    }
    rules_.define(std::string(name), body);
    return std::string(name);
  }

  // One JSON string character whose decoded code point is in s (non-empty), as one element:
  // raw where JSON allows it, else the short escape or \u00XX (controls, U+007F).
  std::string unit(const CpSet& s) {
    std::vector<std::string> alts;
    const CpSet raw = subtract(s, unite(kEscaped, {{0xD800, 0xDFFF}})),
                special = intersect(s, kEscaped);
    if (subtract(complement(s), {{0xD800, 0xDFFF}}).empty()) return use("pchar");
    if (special.empty() && raw.size() == 1 && raw[0].first == raw[0].second)
      return lit(utf8_of(raw[0].first));
    if (!raw.empty()) alts.push_back(gbnf_class(raw));
    if (special == kEscaped) {
      alts.push_back(join({lit("\\"), use("pesc")}));
    } else if (!special.empty()) {
      auto has = [&](uint32_t c) { return !intersect(special, {{c, c}}).empty(); };
      CpSet letters;
      const std::pair<uint32_t, char> kShort[] = {{'"', '"'},  {'\\', '\\'}, {0x08, 'b'},
                                                  {0x0C, 'f'}, {0x0A, 'n'},  {0x0D, 'r'},
                                                  {0x09, 't'}};
      for (auto [c, letter] : kShort)
        if (has(c)) letters.push_back({uint32_t(letter), uint32_t(letter)});
      std::vector<std::string> escapes, hex_forms;
      if (!letters.empty()) escapes.push_back(gbnf_class(normalized(letters)));
      for (uint32_t high = 0; high < 2; ++high) {
        CpSet digits_of;
        for (uint32_t low = 0; low < 16; ++low) {
          if (!has(high * 16 + low)) continue;
          if (low < 10)
            digits_of.push_back({'0' + low, '0' + low});
          else
            digits_of.insert(digits_of.end(),
                             {{'a' + low - 10, 'a' + low - 10}, {'A' + low - 10, 'A' + low - 10}});
        }
        if (!digits_of.empty())
          hex_forms.push_back(join({lit(std::to_string(high)), gbnf_class(normalized(digits_of))}));
      }
      if (has(0x7F)) hex_forms.push_back("\"7\" [fF]");
      if (!hex_forms.empty()) escapes.push_back(join({lit("u00"), group(alternatives(hex_forms))}));
      if (hex_forms.empty() && letters.size() == 1)  // \" or \\ alone
        alts.push_back(lit("\\" + std::string(1, char(letters[0].first))));
      else
        alts.push_back(join({lit("\\"), group(alternatives(escapes))}));
    }
    return group(alternatives(alts));
  }

  std::string emit(const Re& r, const std::string& ptr) {
    switch (r.kind) {
      case Re::chars:
        if (r.set.empty()) fail("a pattern with an empty class" + at(ptr));
        return unit(r.set);
      case Re::seq: {  // runs of plain characters become one literal
        std::string out, run;
        for (const Re& k : r.kids) {
          const bool plain = k.kind == Re::chars && k.set.size() == 1 &&
                             k.set[0].first == k.set[0].second &&
                             intersect(k.set, kEscaped).empty();
          if (plain) {
            run += utf8_of(k.set[0].first);
            continue;
          }
          if (!run.empty()) out = join({out, lit(run)}), run.clear();
          out = join({out, emit(k, ptr)});
        }
        return run.empty() ? out : join({out, lit(run)});
      }
      case Re::alt: {
        std::vector<std::string> alts;
        bool empty = false;
        for (const Re& k : r.kids) {
          std::string e = emit(k, ptr);
          if (e.empty())
            empty = true;
          else if (std::find(alts.begin(), alts.end(), e) == alts.end())
            alts.push_back(e);
        }
        if (alts.empty()) return "";
        return "( " + alternatives(alts) + (empty ? " )?" : " )");
      }
      case Re::repeat: return repeated(emit(r.kids[0], ptr), r.min, r.max);
      case Re::bol:
      case Re::eol: break;
    }
    return "";
  }

  // ---- schemas ----

  std::optional<std::string> compile(const Value& s, const Ctx& ctx) {
    if (s.is(VKind::boolean)) return s.as_bool() ? std::optional(use("value")) : std::nullopt;
    if (!s.is(VKind::object)) fail("a schema must be an object or a boolean" + at(ctx.ptr));
    check_keywords(s, ctx.ptr);
    const Value* ref = s.find("$ref");
    const Value* any = s.find("anyOf");
    const Value* one = s.find("oneOf");
    if (any && one) fail("unsupported keyword 'oneOf' beside 'anyOf'" + at(ctx.ptr));
    if (s.find("allOf") || (ref && has_constraints_besides(s, "$ref")))
      return compile(flatten(s, ctx.ptr, 0), ctx);
    if (ref) return ref_rule(ref_text(*ref, ctx.ptr), ctx);
    if (any || one) return compile_any_of(s, any ? "anyOf" : "oneOf", ctx);
    if (s.find("enum") || s.find("const")) return compile_enum(s, ctx);
    return compile_typed(s, ctx);
  }

  static std::string ref_text(const Value& ref, const std::string& ptr) {
    if (!ref.is(VKind::string)) fail("'$ref' must be a string" + at(ptr));
    return ref.as_string();
  }

  const Value& resolve(const std::string& ref, const std::string& ptr) const {
    if (ref.empty() || ref[0] != '#' || (ref.size() > 1 && ref[1] != '/'))
      fail("unsupported $ref '" + ref + "' (only local JSON pointers)" + at(ptr));
    const Value* v = &root_;
    size_t i = 1;
    while (v && i < ref.size()) {
      const size_t j = std::min(ref.find('/', i + 1), ref.size());
      std::string seg;
      for (size_t k = i + 1; k < j; ++k) {
        if (ref[k] == '~' && k + 1 < j && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
          seg += ref[++k] == '0' ? '~' : '/';
        } else if (ref[k] == '%' && k + 2 < j && std::isxdigit(uint8_t(ref[k + 1])) &&
                   std::isxdigit(uint8_t(ref[k + 2]))) {
          seg += char(std::stoi(ref.substr(k + 1, 2), nullptr, 16));
          k += 2;
        } else {
          seg += ref[k];
        }
      }
      if (v->is(VKind::object)) {
        v = v->find(seg);
      } else if (v->is(VKind::array)) {
        const bool index = !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos;
        const size_t n = index ? std::stoul(seg) : SIZE_MAX;
        v = n < v->as_array().size() ? &v->as_array()[n] : nullptr;
      } else {
        v = nullptr;
      }
      i = j;
    }
    if (!v) fail("$ref '" + ref + "' not found" + at(ptr));
    return *v;
  }

  std::string ref_rule(const std::string& ref, const Ctx& ctx) {
    std::string name;
    if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) {
      name = it->second;
    } else {
      const Value& target = resolve(ref, ctx.ptr);
      name = rules_.reserve(hint_of(ref.substr(1)));
      ref_rules_[ref] = name;
      ref_text_[name] = ref;
      const std::optional<std::string> body = compile(target, Ctx{ref.substr(1), name});
      if (!body) fail("$ref '" + ref + "' accepts no value" + at(ctx.ptr));
      rules_.define(name, *body);
    }
    if (!ctx.head.empty()) head_refs_[ctx.head].insert(name);
    return name;
  }

  // A rule that can reach itself before a byte is a left recursion the matcher cannot run.
  void check_head_cycles() const {
    std::map<std::string, int> state;  // 1: on the path, 2: done
    std::function<void(const std::string&)> visit = [&](const std::string& n) {
      state[n] = 1;
      if (auto it = head_refs_.find(n); it != head_refs_.end()) {
        for (const std::string& m : it->second) {
          if (state[m] == 1)
            fail("$ref '" + ref_text_.at(m) + "' refers to itself before any JSON text");
          if (state[m] == 0) visit(m);
        }
      }
      state[n] = 2;
    };
    for (const auto& [n, targets] : head_refs_)
      if (state[n] == 0) visit(n);
  }

  std::optional<std::string> compile_any_of(const Value& s, const char* key, const Ctx& ctx) {
    const Value& branches = *s.find(key);
    const std::string ptr = pointer_child(ctx.ptr, key);
    if (!branches.is(VKind::array) || branches.as_array().empty())
      fail("'" + std::string(key) + "' must be a non-empty array" + at(ctx.ptr));
    const bool siblings = has_constraints_besides(s, key);
    const Value rest = without(s, {key});
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.as_array().size(); ++i) {
      const Ctx c{pointer_child(ptr, std::to_string(i)), ctx.head};
      const Value& b = branches.as_array()[i];
      const std::optional<std::string> e =
          siblings ? compile(merge(rest, b, c.ptr, 0), c) : compile(b, c);
      if (e && std::find(alts.begin(), alts.end(), *e) == alts.end()) alts.push_back(*e);
    }
    if (alts.empty()) return std::nullopt;
    return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
  }

  std::optional<std::string> compile_typed(const Value& s, const Ctx& ctx) {
    const Types t = types_of(s, ctx.ptr);
    if (!s.find("type")) {
      bool any_keyword = false;
      for (const auto& [k, v] : s.as_object()) any_keyword |= constrains(k);
      if (!any_keyword) return use("value");
    }
    std::vector<std::optional<std::string>> parts;
    if (t.null) parts.push_back(use("null"));
    if (t.boolean) parts.push_back(use("boolean"));
    if (t.object) parts.push_back(compile_object(s, ctx));
    if (t.array) parts.push_back(compile_array(s, ctx));
    if (t.string) parts.push_back(compile_string(s, ctx));
    if (t.number || t.integer) parts.push_back(compile_number(s, ctx, !t.number));
    std::vector<std::string> alts;
    for (auto& p : parts)
      if (p) alts.push_back(*p);
    if (alts.empty()) return std::nullopt;
    return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
  }

  // ---- objects ----

  std::optional<std::string> compile_object(const Value& s, const Ctx& ctx) {
    const Value* props = s.find("properties");
    const Value* req = s.find("required");
    const Value* add = s.find("additionalProperties");
    if (!props && !req && !add) return use("object");
    if (props && !props->is(VKind::object)) fail("'properties' must be an object" + at(ctx.ptr));
    std::vector<std::string> required;
    if (req) {
      if (!req->is(VKind::array)) fail("'required' must be an array of strings" + at(ctx.ptr));
      for (const Value& r : req->as_array()) {
        if (!r.is(VKind::string)) fail("'required' must be an array of strings" + at(ctx.ptr));
        if (std::find(required.begin(), required.end(), r.as_string()) == required.end())
          required.push_back(r.as_string());
      }
    }
    auto is_required = [&](const std::string& k) {
      return std::find(required.begin(), required.end(), k) != required.end();
    };
    const std::optional<std::string> add_value =
        !add ? std::optional(use("value"))
             : compile(*add, Ctx{pointer_child(ctx.ptr, "additionalProperties"), ""});
    std::vector<std::string> declared, members;
    std::vector<bool> member_required;
    auto add_member = [&](const std::string& key, const std::optional<std::string>& value) {
      declared.push_back(key);
      if (!value) return is_required(key);  // an unsatisfiable required key: no object at all
      members.push_back(join({string_literal(key), colon(), *value}));
      member_required.push_back(is_required(key));
      return false;
    };
    if (props) {
      const std::string pptr = pointer_child(ctx.ptr, "properties");
      for (const auto& [k, sub] : props->as_object())
        if (add_member(k, compile(sub, Ctx{pointer_child(pptr, k), ""}))) return std::nullopt;
    }
    for (const std::string& r : required)
      if (!props || !props->find(r))
        if (add_member(r, add_value)) return std::nullopt;
    std::string addkv;
    if (add_value) {
      const std::string key = declared.empty() ? use("string") : key_exclusion(declared, ctx.ptr);
      addkv = join({key, colon(), *add_value});
    }
    return rules_.add(hint_of(ctx.ptr), object_body(members, member_required, addkv, ctx.ptr));
  }

  // `{ members }`: the members in order, the optional ones skippable, then (addkv not empty)
  // any number of additional key-value pairs; commas only between what is written.
  std::string object_body(const std::vector<std::string>& members,
                          const std::vector<bool>& required, const std::string& addkv,
                          const std::string& ptr) {
    const std::string add_tail = addkv.empty() ? "" : "( " + join({sep(), addkv}) + " )*";
    const size_t n = members.size();
    if (n == 0) {
      if (addkv.empty()) return join({lit("{"), ws(), lit("}")});
      return join({lit("{"), ws(), "(", addkv, add_tail, ws(), ")?", lit("}")});
    }
    const size_t first_required =
        size_t(std::find(required.begin(), required.end(), true) - required.begin());
    const size_t firsts = std::min(first_required + 1, n);  // members that may come first
    // tails[k]: the members from k on, after one has been written (rules when several
    // first members share them).
    std::vector<std::string> tails(n + 1);
    tails[n] = add_tail;
    for (size_t k = n - 1; k >= 1; --k) {
      const std::string piece = join({sep(), members[k]});
      const std::string t = join({required[k] ? piece : "( " + piece + " )?", tails[k + 1]});
      tails[k] = firsts > 1 && !t.empty() ? rules_.add(hint_of(ptr) + "-tail", t) : t;
    }
    std::vector<std::string> alts;
    for (size_t k = 0; k < firsts; ++k) alts.push_back(join({members[k], tails[k + 1]}));
    if (first_required == n && !addkv.empty()) alts.push_back(join({addkv, add_tail}));
    const std::string body = alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
    if (first_required == n) return join({lit("{"), ws(), "(", body, ws(), ")?", lit("}")});
    return join({lit("{"), ws(), body, ws(), lit("}")});
  }

  // A constant string or a declared key as JSON text: its control characters in any escaped
  // spelling (llguidance allows only json_quoted's in a declared key: a known difference).
  std::string string_literal(const std::string& key) {
    std::string out, run = "\"";
    for (uint32_t cp : decode_utf8(key)) {
      if (cp >= 0x20 && cp != 0x7F) {
        const std::string q = json_quoted(utf8_of(cp));
        run += q.substr(1, q.size() - 2);
        continue;
      }
      out = join({out, run.empty() ? "" : lit(run), unit({{cp, cp}})});
      run.clear();
    }
    return join({out, lit(run + "\"")});
  }

  struct TrieNode {
    std::map<uint32_t, size_t> kids;
    bool terminal = false;
  };

  // The code-point trie of `strings` (node 0 the root).
  static std::vector<TrieNode> build_trie(const std::vector<std::string>& strings) {
    std::vector<TrieNode> trie(1);
    for (const std::string& str : strings) {
      size_t node = 0;
      for (uint32_t cp : decode_utf8(str)) {
        auto it = trie[node].kids.find(cp);
        if (it == trie[node].kids.end()) {
          trie.emplace_back();
          it = trie[node].kids.emplace(cp, trie.size() - 1).first;
        }
        node = it->second;
      }
      trie[node].terminal = true;
    }
    return trie;
  }

  // A JSON string (with quotes) that is none of `keys` (decoded): a walk down their trie
  // that leaves it or stops where no key ends.
  std::string key_exclusion(const std::vector<std::string>& keys, const std::string& ptr) {
    const std::vector<TrieNode> trie = build_trie(keys);
    return rules_.add(hint_of(ptr) + "-key", join({lit("\""), key_trie(trie, 0)}));
  }

  std::string key_trie(const std::vector<TrieNode>& trie, size_t node) {
    std::vector<std::string> alts;
    if (!trie[node].terminal) alts.push_back(lit("\""));
    CpSet seen;
    for (auto [cp, kid] : trie[node].kids) {
      alts.push_back(join({unit({{cp, cp}}), key_trie(trie, kid)}));
      seen.push_back({cp, cp});
    }
    alts.push_back(join({unit(complement(normalized(seen))), use("key-rest")}));
    return "( " + alternatives(alts) + " )";
  }

  // ---- arrays ----

  std::optional<std::string> compile_array(const Value& s, const Ctx& ctx) {
    const Value* prefix = s.find("prefixItems");
    const Value* items = s.find("items");
    const Value* extra = s.find("additionalItems");
    std::optional<uint64_t> lo = count_of(s, "minItems", ctx.ptr),
                            hi = count_of(s, "maxItems", ctx.ptr);
    if (!prefix && !items && !extra && !lo && !hi) return use("array");
    const Value* prefix_list = prefix;
    std::string prefix_ptr = pointer_child(ctx.ptr, "prefixItems");
    const Value* item_schema = items;
    std::string item_ptr = pointer_child(ctx.ptr, "items");
    if (items && items->is(VKind::array)) {  // the older tuple form
      if (prefix) fail("unsupported keyword 'items' (an array) beside 'prefixItems'" + at(ctx.ptr));
      prefix_list = items, prefix_ptr = item_ptr;
      item_schema = extra, item_ptr = pointer_child(ctx.ptr, "additionalItems");
    } else if (extra) {
      fail("unsupported keyword 'additionalItems' without an 'items' array" + at(ctx.ptr));
    }
    if (prefix_list && !prefix_list->is(VKind::array))
      fail("'prefixItems' must be an array" + at(ctx.ptr));
    const uint64_t min = lo.value_or(0);
    std::optional<uint64_t> max = hi;
    auto cap_max = [&](uint64_t m) { max = max ? std::min(*max, m) : m; };
    std::vector<std::string> pre;
    if (prefix_list) {
      for (const Value& p : prefix_list->as_array()) {
        auto e = compile(p, Ctx{pointer_child(prefix_ptr, std::to_string(pre.size())), ""});
        if (!e) break;  // no item can stand here, so the array ends before it
        pre.push_back(*e);
      }
      if (pre.size() < prefix_list->as_array().size()) cap_max(pre.size());
    }
    const std::optional<std::string> item =
        item_schema ? compile(*item_schema, Ctx{item_ptr, ""}) : std::optional(use("value"));
    const uint64_t k = pre.size();
    if (!item) cap_max(k);
    if (max && min > *max) return std::nullopt;
    const std::string hint = hint_of(ctx.ptr);
    if (max && *max == 0) return rules_.add(hint, join({lit("["), ws(), lit("]")}));
    std::string items_text;
    if (k == 0) {
      const auto more_max = max ? std::optional(*max - 1) : std::nullopt;
      items_text = join({*item, repeated(join({sep(), *item}), min > 1 ? min - 1 : 0, more_max)});
    } else {
      const uint64_t last = max ? std::min<uint64_t>(k, *max) : k;  // prefix items that may come
      std::string rest;
      if (last == k && item)
        rest = repeated(join({sep(), *item}), min > k ? min - k : 0,
                        max ? std::optional(*max - k) : std::nullopt);
      for (uint64_t j = last; j-- > 1;) {
        const std::string piece = join({sep(), pre[j], rest});
        rest = j < min ? piece : "( " + piece + " )?";
      }
      items_text = join({pre[0], rest});
    }
    if (min >= 1) return rules_.add(hint, join({lit("["), ws(), items_text, ws(), lit("]")}));
    return rules_.add(hint, join({lit("["), ws(), "(", items_text, ws(), ")?", lit("]")}));
  }

  // ---- strings ----

  std::optional<std::string> compile_string(const Value& s, const Ctx& ctx) {
    const std::optional<uint64_t> lo = count_of(s, "minLength", ctx.ptr);
    const std::optional<uint64_t> hi = count_of(s, "maxLength", ctx.ptr);
    const Value* pattern = s.find("pattern");
    const Value* format = s.find("format");
    if (!lo && !hi && !pattern && !format) return use("string");
    if (lo && hi && *lo > *hi) return std::nullopt;
    const std::string hint = hint_of(ctx.ptr);
    if (!pattern && !format)
      return rules_.add(hint,
                        join({lit("\""), repeated(use("char"), lo.value_or(0), hi), lit("\"")}));
    if (pattern && format) fail("unsupported keyword 'format' beside 'pattern'" + at(ctx.ptr));
    std::string re;
    if (pattern) {
      if (!pattern->is(VKind::string)) fail("'pattern' must be a string" + at(ctx.ptr));
      re = pattern->as_string();
    } else {
      if (!format->is(VKind::string)) fail("'format' must be a string" + at(ctx.ptr));
      const std::optional<std::string> f = format_pattern(format->as_string());
      if (!f) fail("unsupported format '" + format->as_string() + "'" + at(ctx.ptr));
      re = *f;
    }
    std::vector<PatternAlternative> alts = PatternParser(re, ctx.ptr).parse();
    if ((lo || hi) && !apply_lengths(alts, lo, hi))
      fail("unsupported keyword '" + std::string(hi ? "maxLength" : "minLength") + "' beside '" +
           (pattern ? "pattern" : "format") + "'" + at(ctx.ptr));
    std::vector<std::string> out;
    for (const PatternAlternative& a : alts) {
      if (a.body.kind == Re::repeat && a.body.max && *a.body.max < a.body.min) continue;
      const std::string any = use("pchar") + "*";
      const std::string body = emit(a.body, ctx.ptr);
      const bool both_open = !a.start && !a.end;
      out.push_back(join({lit("\""), a.start ? "" : any, both_open && body.empty() ? "" : body,
                          a.end || (both_open && body.empty()) ? "" : any, lit("\"")}));
    }
    if (out.empty()) return std::nullopt;
    return rules_.add(hint, alternatives(out));
  }

  // Lengths beside a pattern: fine when the pattern implies them, or when the pattern is one
  // anchored repetition of one class (its counts narrowed). False: unsupported.
  static bool apply_lengths(std::vector<PatternAlternative>& alts, std::optional<uint64_t> lo,
                            std::optional<uint64_t> hi) {
    bool implied = true;
    for (const PatternAlternative& a : alts) {
      auto [min, max] = length_bounds(a.body);
      if (!a.start || !a.end) max = std::nullopt;
      implied &= (!lo || *lo <= min) && (!hi || (max && *max <= *hi));
    }
    if (implied) return true;
    if (alts.size() != 1 || !alts[0].start || !alts[0].end) return false;
    Re* r = &alts[0].body;
    if (r->kind == Re::seq && r->kids.size() == 1) r = &r->kids[0];
    if (r->kind != Re::repeat || r->kids[0].kind != Re::chars) return false;
    r->min = std::max(r->min, lo.value_or(0));
    if (hi) r->max = r->max ? std::min(*r->max, *hi) : *hi;
    alts[0].body = Re(*r);
    return true;
  }

  // ---- numbers ----

  std::optional<std::string> compile_number(const Value& s, const Ctx& ctx, bool integer) {
    std::optional<Bound> lo, hi;
    auto tighten = [&](std::optional<Bound>& b, Bound n, int sign) {
      const int c = b ? cmp(n.v, b->v) * sign : 1;
      if (c > 0 || (c == 0 && n.excl)) b = n;
    };
    const Value* xmin = s.find("exclusiveMinimum");
    const Value* xmax = s.find("exclusiveMaximum");
    const bool draft4_xmin = xmin && xmin->is(VKind::boolean) && xmin->as_bool();
    const bool draft4_xmax = xmax && xmax->is(VKind::boolean) && xmax->as_bool();
    if (const Value* v = s.find("minimum"))
      tighten(lo, {dec_of(*v, "'minimum'" + at(ctx.ptr)), draft4_xmin}, 1);
    if (const Value* v = s.find("maximum"))
      tighten(hi, {dec_of(*v, "'maximum'" + at(ctx.ptr)), draft4_xmax}, -1);
    if (xmin && !xmin->is(VKind::boolean))
      tighten(lo, {dec_of(*xmin, "'exclusiveMinimum'" + at(ctx.ptr)), true}, 1);
    if (xmax && !xmax->is(VKind::boolean))
      tighten(hi, {dec_of(*xmax, "'exclusiveMaximum'" + at(ctx.ptr)), true}, -1);
    if (!lo && !hi) return use(integer ? "integer" : "number");
    const std::string hint = hint_of(ctx.ptr);
    if (!integer) {
      const std::optional<std::string> e = number_range(lo, hi);
      return e ? std::optional(rules_.add(hint, *e)) : std::nullopt;
    }
    std::optional<Dec> ilo, ihi;
    if (lo) ilo = lo->excl ? int_plus_one(floor_of(lo->v)) : ceil_of(lo->v);
    if (hi) ihi = hi->excl ? int_minus_one(ceil_of(hi->v)) : floor_of(hi->v);
    if (ilo && ihi && cmp(*ilo, *ihi) > 0) return std::nullopt;
    return rules_.add(hint, int_range(ilo, ihi));
  }

  // ---- enum and const ----

  std::optional<std::string> compile_enum(const Value& s, const Ctx& ctx) {
    for (const auto& [k, v] : s.as_object())
      if (constrains(k) && k != "enum" && k != "const" && k != "type")
        fail("unsupported keyword '" + k + "' beside '" + (s.find("enum") ? "enum" : "const") +
             "'" + at(ctx.ptr));
    const std::optional<std::vector<Value>> values = enum_values(s, ctx.ptr);
    const Types t = types_of(s, ctx.ptr);
    std::vector<std::string> texts, alts;
    std::vector<std::string> strings;
    for (const Value& v : *values) {
      if (!value_has_type(v, t)) continue;
      const std::string c = canonical(v);
      if (std::find(texts.begin(), texts.end(), c) != texts.end()) continue;
      texts.push_back(c);
      if (v.is(VKind::string))
        strings.push_back(c);
      else
        alts.push_back(literal(v));
    }
    if (!strings.empty()) alts.insert(alts.begin(), string_trie(strings));
    if (alts.empty()) return std::nullopt;
    const std::string body = alternatives(alts);
    if (alts.size() == 1 && body.size() <= 40) return group(body);
    return rules_.add(hint_of(ctx.ptr), body);
  }

  static std::optional<std::vector<Value>> enum_values(const Value& s, const std::string& ptr) {
    std::optional<std::vector<Value>> out;
    if (const Value* c = s.find("const")) out = std::vector<Value>{*c};
    if (const Value* e = s.find("enum")) {
      if (!e->is(VKind::array)) fail("'enum' must be an array" + at(ptr));
      if (!out) return e->as_array();
      std::vector<Value> both;
      for (const Value& v : e->as_array())
        if (canonical(v) == canonical((*out)[0])) both.push_back(v);
      return both;
    }
    return out;
  }

  // A JSON value written as itself, whitespace allowed between the tokens of arrays/objects.
  std::string literal(const Value& v) {
    if (v.is(VKind::array)) {
      std::string items;
      for (const Value& e : v.as_array())
        items = items.empty() ? literal(e) : join({items, sep(), literal(e)});
      return join({lit("["), ws(), items, items.empty() ? "" : ws(), lit("]")});
    }
    if (v.is(VKind::object)) {
      std::string items;
      for (const auto& [k, e] : v.as_object()) {
        const std::string kv = join({lit(json_quoted(k)), colon(), literal(e)});
        items = items.empty() ? kv : join({items, sep(), kv});
      }
      return join({lit("{"), ws(), items, items.empty() ? "" : ws(), lit("}")});
    }
    if (v.is(VKind::string)) return string_literal(v.as_string());
    return lit(canonical(v));
  }

  // Alternatives of quoted strings, their common prefixes shared.
  std::string string_trie(const std::vector<std::string>& strings) {
    return trie_text(build_trie(strings), 0);
  }

  std::string trie_text(const std::vector<TrieNode>& trie, size_t node) {
    std::vector<std::string> alts;
    for (auto [cp, kid] : trie[node].kids) {
      std::string text = utf8_of(cp);
      size_t n = kid;
      while (trie[n].kids.size() == 1 && !trie[n].terminal) {
        text += utf8_of(trie[n].kids.begin()->first);
        n = trie[n].kids.begin()->second;
      }
      alts.push_back(join({lit(text), trie_text(trie, n)}));
    }
    if (alts.empty()) return "";
    if (trie[node].terminal) return "( " + alternatives(alts) + " )?";
    return alts.size() == 1 ? alts[0] : "( " + alternatives(alts) + " )";
  }

  // ---- allOf and $ref siblings: merging schemas ----

  // s without allOf or $ref at its top: their schemas merged into it.
  Value flatten(const Value& s, const std::string& ptr, int depth) {
    if (!s.is(VKind::object)) return s;
    if (depth > kMaxMergeDepth) fail("allOf/$ref nested too deeply to merge" + at(ptr));
    check_keywords(s, ptr);
    if (const Value* r = s.find("$ref")) {
      const Value& target = resolve(ref_text(*r, ptr), ptr);
      return merge(flatten(target, ptr, depth + 1), without(s, {"$ref"}), ptr, depth + 1);
    }
    if (const Value* all = s.find("allOf")) {
      if (!all->is(VKind::array) || all->as_array().empty())
        fail("'allOf' must be a non-empty array" + at(ptr));
      Value acc = without(s, {"allOf"});
      for (const Value& item : all->as_array()) acc = merge(acc, item, ptr, depth + 1);
      return acc;
    }
    return s;
  }

  // The schema both a and b impose (a's keys first).
  Value merge(const Value& a, const Value& b, const std::string& ptr, int depth) {
    if (a.is(VKind::boolean)) return a.as_bool() ? flatten(b, ptr, depth + 1) : a;
    if (b.is(VKind::boolean)) return b.as_bool() ? flatten(a, ptr, depth + 1) : b;
    if (canonical(a) == canonical(b)) return flatten(a, ptr, depth + 1);
    const Value fa = flatten(a, ptr, depth + 1), fb = flatten(b, ptr, depth + 1);
    if (fa.is(VKind::boolean) || fb.is(VKind::boolean)) return merge(fa, fb, ptr, depth + 1);
    json::Object out;
    std::vector<std::string> keys;
    for (const auto& [k, v] : fa.as_object()) keys.push_back(k);
    for (const auto& [k, v] : fb.as_object())
      if (!fa.find(k)) keys.push_back(k);
    for (const std::string& k : keys) {
      if (k == "properties" || k == "additionalProperties" || k == "enum" || k == "const") continue;
      const Value* x = fa.find(k);
      const Value* y = fb.find(k);
      out.emplace_back(k, x && y ? merge_keyword(k, *x, *y, ptr, depth) : x ? *x : *y);
    }
    merge_properties(fa, fb, out, ptr, depth);
    const auto va = enum_values(fa, ptr), vb = enum_values(fb, ptr);
    if (va || vb) {
      json::Array both;
      for (const Value& v : va ? *va : *vb) {
        bool keep = !(va && vb);
        for (size_t i = 0; !keep && i < vb->size(); ++i) keep = canonical(v) == canonical((*vb)[i]);
        if (keep) both.push_back(v);
      }
      out.emplace_back("enum", Value(std::move(both)));
    }
    return Value(std::move(out));
  }

  Value merge_keyword(const std::string& k, const Value& x, const Value& y, const std::string& ptr,
                      int depth) {
    if (canonical(x) == canonical(y) || is_annotation(k) || k == "$defs" || k == "definitions")
      return x;
    if (k == "type") {
      const Types a = types_of(Value(json::Object{{"type", x}}), ptr);
      const Types b = types_of(Value(json::Object{{"type", y}}), ptr);
      json::Array t;
      auto both = [&](bool p, bool q, const char* name) {
        if (p && q) t.emplace_back(std::string(name));
      };
      both(a.null, b.null, "null");
      both(a.boolean, b.boolean, "boolean");
      both(a.object, b.object, "object");
      both(a.array, b.array, "array");
      both(a.string, b.string, "string");
      both(a.number, b.number, "number");
      if (!(a.number && b.number)) both(a.integer, b.integer, "integer");
      return Value(std::move(t));
    }
    const bool lower =
        k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems";
    const bool upper =
        k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems";
    if ((lower || upper) && x.is(VKind::number) && y.is(VKind::number)) {
      const int c = cmp(dec_of(x, "'" + k + "'" + at(ptr)), dec_of(y, "'" + k + "'" + at(ptr)));
      return (c > 0) == lower ? x : y;
    }
    if (k == "required" && x.is(VKind::array) && y.is(VKind::array)) {
      json::Array r = x.as_array();
      for (const Value& v : y.as_array())
        if (std::none_of(r.begin(), r.end(),
                         [&](const Value& e) { return canonical(e) == canonical(v); }))
          r.push_back(v);
      return Value(std::move(r));
    }
    if (k == "items" && !x.is(VKind::array) && !y.is(VKind::array))
      return merge(x, y, ptr, depth + 1);
    fail("unsupported keyword '" + k + "' with two different values to merge (allOf/$ref)" +
         at(ptr));
  }

  // properties and additionalProperties of a and b merged: a property only one side declares
  // must also satisfy the other side's additionalProperties.
  void merge_properties(const Value& a, const Value& b, json::Object& out, const std::string& ptr,
                        int depth) {
    const Value* pa = a.find("properties");
    const Value* pb = b.find("properties");
    const Value* aa = a.find("additionalProperties");
    const Value* ab = b.find("additionalProperties");
    auto restricted = [&](const Value& v, const Value* add) {
      return add ? merge(v, *add, ptr, depth + 1) : v;
    };
    json::Object props;
    if (pa && pa->is(VKind::object))
      for (const auto& [k, v] : pa->as_object()) {
        const Value* y = pb ? pb->find(k) : nullptr;
        props.emplace_back(k, y ? merge(v, *y, ptr, depth + 1) : restricted(v, ab));
      }
    if (pb && pb->is(VKind::object))
      for (const auto& [k, v] : pb->as_object())
        if (!pa || !pa->find(k)) props.emplace_back(k, restricted(v, aa));
    if (pa || pb) out.emplace_back("properties", Value(std::move(props)));
    if (aa && ab)
      out.emplace_back("additionalProperties", merge(*aa, *ab, ptr, depth + 1));
    else if (aa || ab)
      out.emplace_back("additionalProperties", aa ? *aa : *ab);
  }

  const Value& root_;
  JsonSchemaOptions opt_;
  RuleSet rules_;
  std::set<std::string, std::less<>> made_;                 // primitive rules made
  std::map<std::string, std::string> ref_rules_;            // $ref -> its rule
  std::map<std::string, std::string> ref_text_;             // rule -> its $ref
  std::map<std::string, std::set<std::string>> head_refs_;  // rule -> rules at its start
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema, const JsonSchemaOptions& opt) {
  const Value root = json::parse(schema, "[json_schema] schema", kMaxSchemaDepth);
  return SchemaCompiler(root, opt).run();
}

std::string json_object_gbnf(const JsonSchemaOptions& opt) {
  const Value root(json::Object{{"type", Value(std::string("object"))}});
  return SchemaCompiler(root, opt).run();
}

}  // namespace parley
