// Python object semantics for template values: str()/repr(), truthiness, comparisons,
// json.dumps, and the slice of Unicode (case, whitespace, printability) that CPython's str
// methods need.
#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace parley::jinja {

void fail(const std::string& message) { throw TemplateError{message, 0, false}; }
void fail_unsupported(const std::string& message) { throw TemplateError{message, 0, true}; }

long DictData::find(const Value& key) const {
  for (size_t i = 0; i < items.size(); ++i) {
    if (py_eq(items[i].first, key)) return static_cast<long>(i);
  }
  return -1;
}

long DictData::find(std::string_view key) const {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].first.is_string() && items[i].first.str() == key) return static_cast<long>(i);
  }
  return -1;
}

void DictData::set(Value key, Value value) {
  long i = find(key);
  if (i >= 0) {
    items[i].second = std::move(value);
  } else {
    items.emplace_back(std::move(key), std::move(value));
  }
}

Value Value::list(ValueList items) {
  Value v(Kind::list);
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::tuple(ValueList items) {
  Value v(Kind::tuple);
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::generator(ValueList items) {
  Value v(Kind::generator);
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::dict() {
  Value v(Kind::dict);
  v.dict_ = std::make_shared<DictData>();
  return v;
}
Value Value::namespace_object() {
  Value v(Kind::namespace_);
  v.dict_ = std::make_shared<DictData>();
  return v;
}
Value Value::callable(std::string name, std::function<Value(Interpreter&, Args&)> fn,
                      bool is_macro) {
  Value v(Kind::callable);
  v.fn_ = std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn), is_macro});
  return v;
}
Value Value::object(std::shared_ptr<ObjectData> obj) {
  Value v(Kind::object);
  v.obj_ = std::move(obj);
  return v;
}
Value Value::undefined(std::string name) {
  Value v;
  v.undef_ = std::make_shared<UndefinedData>();
  v.undef_->name = std::move(name);
  return v;
}
Value Value::undefined_attr(const Value& owner, std::string name) {
  Value v;
  v.undef_ = std::make_shared<UndefinedData>();
  v.undef_->name = std::move(name);
  v.undef_->owner = py_type_name(owner);
  v.undef_->has_owner = true;
  return v;
}
Value Value::undefined_item(const Value& owner, const Value& key) {
  if (key.is_string()) return undefined_attr(owner, key.str());
  Value v = undefined_attr(owner, py_repr(key));
  v.undef_->element = true;
  return v;
}
Value Value::undefined_hint(std::string hint) {
  Value v;
  v.undef_ = std::make_shared<UndefinedData>();
  v.undef_->hint = std::move(hint);
  return v;
}

const void* Value::identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  if (fn_) return fn_.get();
  if (obj_) return obj_.get();
  return nullptr;
}

// ---- Unicode ----

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    char32_t cp;
    int n;
    if (c < 0x80) {
      cp = c, n = 1;
    } else if ((c >> 5) == 6) {
      cp = c & 0x1f, n = 2;
    } else if ((c >> 4) == 14) {
      cp = c & 0x0f, n = 3;
    } else if ((c >> 3) == 30) {
      cp = c & 0x07, n = 4;
    } else {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    if (i + n > s.size()) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    bool ok = true;
    for (int k = 1; k < n; ++k) {
      unsigned char cc = s[i + k];
      if ((cc >> 6) != 2) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool py_isspace(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic: the scripts a chat
// template upper/lowercases in practice (role names, enum values).
char32_t py_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17f) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_upper) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x178) return 0xff;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3ab && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

char32_t py_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17f && c != 0x178) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_upper) return (c % 2 == 0) ? c - 1 : c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x3b1 && c <= 0x3cb) return c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

bool py_isalpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (c == 0xd7 || c == 0xf7) return false;
  if (c >= 0xc0 && c <= 0x24f) return true;
  if (py_lower(c) != c || py_upper(c) != c) return true;
  // CJK, kana, Hangul: letters in Python's sense.
  return (c >= 0x3040 && c <= 0x30ff) || (c >= 0x3400 && c <= 0x9fff) ||
         (c >= 0xac00 && c <= 0xd7a3);
}

bool py_isdigit(char32_t c) { return c >= '0' && c <= '9'; }

bool py_isprintable(char32_t c) {
  if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
      (c >= 0x205f && c <= 0x2064) || c == 0x3000 || c == 0xfeff)
    return false;
  if (c >= 0xd800 && c <= 0xdfff) return false;
  if (c >= 0xe000 && c <= 0xf8ff) return false;
  return true;
}

std::string py_upper_str(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xdf) {
      out += "SS";  // ß has no single-character uppercase
    } else {
      utf8_append(out, py_upper(c));
    }
  }
  return out;
}

std::string py_lower_str(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) utf8_append(out, py_lower(c));
  return out;
}

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set;
  bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) {
    if (!chars.is_string()) fail("strip arg must be None or str");
    set = utf8_decode(chars.str());
  }
  auto strip_it = [&](char32_t c) {
    return whitespace ? py_isspace(c) : set.find(c) != std::u32string::npos;
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  std::u32string u = utf8_decode(s);
  std::u32string cur;
  for (size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
               c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      cur.push_back(c);
      continue;
    }
    if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
    lines.push_back(utf8_encode(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(utf8_encode(cur));
  return lines;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// ---- str / repr ----

// CPython's float.__repr__: the shortest round-tripping digits, positional for decimal
// exponents in [-4, 16), otherwise d.ddde+XX.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (size_t i = 0; i < epos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  }
  return out;
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!py_isprintable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string py_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::string: {
      std::string r = repr_string(v.str());
      return v.safe() ? "Markup(" + r + ")" : r;
    }
    case Kind::undefined: return "Undefined";
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return "";
    case Kind::none: return "None";
    case Kind::boolean: return v.as_bool() ? "True" : "False";
    case Kind::integer: return std::to_string(v.as_int());
    case Kind::floating: return float_repr(v.as_double());
    case Kind::string: return v.str();
    case Kind::list:
    case Kind::tuple: {
      bool tuple = v.kind() == Kind::tuple;
      std::string out = tuple ? "(" : "[";
      const ValueList& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += py_repr(items[i]);
      }
      if (tuple && items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::dict:
    case Kind::namespace_: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.dict_data().items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(val);
      }
      out += "}";
      return v.kind() == Kind::dict ? out : "<Namespace " + out + ">";
    }
    case Kind::generator: return "<generator object>";
    case Kind::callable:
      return v.callable_data().is_macro ? "<Macro '" + v.callable_data().name + "'>"
                                        : "<built-in function " + v.callable_data().name + ">";
    case Kind::object: return v.object_data().repr();
  }
  return "";
}

std::string py_type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return v.safe() ? "Markup" : "str";
    case Kind::list: return "list";
    case Kind::tuple: return "tuple";
    case Kind::generator: return "generator";
    case Kind::dict: return "dict";
    case Kind::namespace_: return "Namespace";
    case Kind::callable: return v.callable_data().is_macro ? "Macro" : "builtin_function_or_method";
    case Kind::object: return "object";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean:
    case Kind::integer: return v.as_int() != 0;
    case Kind::floating: return v.as_double() != 0.0;
    case Kind::string: return !v.str().empty();
    case Kind::list:
    case Kind::tuple: return !v.items().empty();
    case Kind::dict: return !v.dict_data().items.empty();
    default: return true;
  }
}

bool py_eq(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return a.str() == b.str();
    case Kind::list:
    case Kind::tuple: {
      const ValueList &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!py_eq(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::dict: {
      const DictData &x = a.dict_data(), &y = b.dict_data();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        long j = y.find(k);
        if (j < 0 || !py_eq(v, y.items[j].second)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool py_lt(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
  if (a.kind() == b.kind() && a.is_sequence()) {
    const ValueList &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_eq(x[i], y[i])) return py_lt(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + py_type_name(a) + "' and '" + py_type_name(b) +
       "'");
}

std::string undefined_message(const Value& v) {
  const UndefinedData* u = v.undefined_data();
  if (!u) return "undefined value";
  if (!u->hint.empty()) return u->hint;
  if (!u->has_owner) return "'" + u->name + "' is undefined";
  if (u->element) return u->owner + " object has no element " + u->name;
  return "'" + u->owner + " object' has no attribute '" + u->name + "'";
}

void fail_undefined(const Value& v) { fail(undefined_message(v)); }

// ---- json.dumps ----

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x",
                          0xd800 + static_cast<unsigned>(v >> 10),
                          0xdc00 + static_cast<unsigned>(v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          utf8_append(out, c);
        }
      }
    }
  }
  out.push_back('"');
}

static std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

static void json_value(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  if (level > 500) fail("maximum recursion depth exceeded while encoding a JSON object");
  auto newline = [&](int lvl) {
    out.push_back('\n');
    for (int i = 0; i < lvl; ++i) out += o.indent;
  };
  switch (v.kind()) {
    case Kind::none: out += "null"; return;
    case Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Kind::integer: out += std::to_string(v.as_int()); return;
    case Kind::floating: out += json_float(v.as_double()); return;
    case Kind::string: json_string(out, v.str(), o.ensure_ascii); return;
    case Kind::list:
    case Kind::tuple: {
      const ValueList& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.has_indent) newline(level + 1);
        json_value(out, items[i], o, level + 1);
      }
      if (o.has_indent) newline(level);
      out.push_back(']');
      return;
    }
    case Kind::dict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.dict_data().items) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return py_lt(a->first, b->first); });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* e : entries) {
        if (!first) out += o.item_separator;
        first = false;
        if (o.has_indent) newline(level + 1);
        const Value& k = e->first;
        std::string key;
        switch (k.kind()) {
          case Kind::string: key = k.str(); break;
          case Kind::boolean: key = k.as_bool() ? "true" : "false"; break;
          case Kind::integer: key = std::to_string(k.as_int()); break;
          case Kind::floating: key = json_float(k.as_double()); break;
          case Kind::none: key = "null"; break;
          default: fail("keys must be str, int, float, bool or None, not " + py_type_name(k));
        }
        json_string(out, key, o.ensure_ascii);
        out += o.key_separator;
        json_value(out, e->second, o, level + 1);
      }
      if (o.has_indent) newline(level);
      out.push_back('}');
      return;
    }
    default: fail("Object of type " + py_type_name(v) + " is not JSON serializable");
  }
}

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  json_value(out, v, options, 0);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::dict();
      for (const auto& [k, e] : j.items()) d.dict_data().set(Value::string(k), from_json(e));
      return d;
    }
    default: fail("[jinja] unsupported JSON value in the template context");
  }
}

}  // namespace parley::jinja
