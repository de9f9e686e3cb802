#include "io/json_lite.h"

#include <charconv>
#include <cstdlib>
#include <unordered_set>

#include "engine/error.h"

namespace parley::io::json {

namespace {

[[noreturn]] void wrong_kind(Value::Kind want, Value::Kind got) {
  throw Error(ErrorKind::invalid_argument, "[json] expected " + std::string(kind_name(want)) +
                                               ", got " + std::string(kind_name(got)));
}

// Recursive descent over `text`; depth counts open arrays/objects so a "[[[[..." bomb
// fails with an error instead of exhausting the stack.
class Parser {
 public:
  Parser(std::string_view text, const std::string& source, int max_depth)
      : s_(text), source_(source), max_depth_(max_depth) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected '" + printable(s_[pos_]) + "' after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::invalid_argument,
                source_ + ": invalid JSON: " + what + " at byte " + std::to_string(pos_));
  }
  static std::string printable(char c) {
    const auto u = uint8_t(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    static const char* kHex = "0123456789abcdef";
    return std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip_ws() {
    while (!at_end() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (at_end()) fail(std::string("expected '") + c + "', got the end of the text");
    if (s_[pos_] != c) fail(std::string("expected '") + c + "', got '" + printable(s_[pos_]) + "'");
    ++pos_;
  }
  void expect_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) fail("invalid literal");
    pos_ += w.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("expected a value, got the end of the text");
    switch (s_[pos_]) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Value(parse_string());
      case 't': expect_word("true"); return Value(true);
      case 'f': expect_word("false"); return Value(false);
      case 'n': expect_word("null"); return Value();
      default: break;
    }
    if (s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')) return Value(parse_number());
    fail("unexpected '" + printable(s_[pos_]) + "'");
  }

  void enter(int depth) const {
    if (depth > max_depth_) fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
  }

  Value parse_object(int depth) {
    enter(depth);
    expect('{');
    Object obj;
    std::unordered_set<std::string> keys;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return Value(std::move(obj));
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') fail("expected a string key");
      const size_t key_pos = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) {
        pos_ = key_pos;
        fail("duplicate key \"" + key + "\"");
      }
      skip_ws();
      expect(':');
      skip_ws();
      Value v = parse_value(depth);
      obj.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return Value(std::move(obj));
    }
  }

  Value parse_array(int depth) {
    enter(depth);
    expect('[');
    Array arr;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Value(std::move(arr));
    }
    for (;;) {
      skip_ws();
      arr.push_back(parse_value(depth));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return Value(std::move(arr));
    }
  }

  // Grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  Number parse_number() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      fail("invalid number");
    }
    if (peek() == '.') {
      ++pos_;
      if (digits() == 0) fail("invalid number: no digits after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) fail("invalid number: no digits in the exponent");
    }
    return Number{std::string(s_.substr(start, pos_ - start))};
  }

  uint32_t parse_hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= uint32_t(c - 'A' + 10);
      else
        fail("invalid hex digit in \\u escape");
    }
    return v;
  }

  void parse_escape(std::string& out) {
    if (at_end()) fail("unterminated string");
    const char c = s_[pos_++];
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: --pos_; fail("invalid escape '\\" + printable(c) + "'");
    }
    uint32_t cp = parse_hex4();
    if (cp >= 0xdc00 && cp <= 0xdfff) fail("unpaired low surrogate in \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (s_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in \\u escape");
      pos_ += 2;
      const uint32_t lo = parse_hex4();
      if (lo < 0xdc00 || lo > 0xdfff) fail("invalid low surrogate in \\u escape");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    append_utf8(out, cp);
  }

  // Copies one well-formed UTF-8 sequence (no overlongs, surrogates or values past
  // U+10FFFF) starting at a lead byte >= 0x80.
  void copy_utf8(std::string& out) {
    const auto b0 = uint8_t(s_[pos_]);
    int len = 0;
    uint32_t cp = 0, min = 0;
    if (b0 >= 0xc2 && b0 <= 0xdf)
      len = 2, cp = b0 & 0x1fu, min = 0x80;
    else if (b0 >= 0xe0 && b0 <= 0xef)
      len = 3, cp = b0 & 0x0fu, min = 0x800;
    else if (b0 >= 0xf0 && b0 <= 0xf4)
      len = 4, cp = b0 & 0x07u, min = 0x10000;
    else
      fail("invalid UTF-8 byte");
    if (s_.size() - pos_ < size_t(len)) fail("truncated UTF-8 sequence");
    for (int i = 1; i < len; ++i) {
      const auto b = uint8_t(s_[pos_ + size_t(i)]);
      if ((b & 0xc0) != 0x80) fail("invalid UTF-8 continuation byte");
      cp = (cp << 6) | (b & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail("invalid UTF-8 sequence");
    out.append(s_.substr(pos_, size_t(len)));
    pos_ += size_t(len);
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const auto c = uint8_t(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        ++pos_;
        parse_escape(out);
      } else if (c < 0x20) {
        fail("control character in string");
      } else if (c < 0x80) {
        out += char(c);
        ++pos_;
      } else {
        copy_utf8(out);
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  int max_depth_;
  size_t pos_ = 0;
};

bool is_integer_text(const std::string& t) { return t.find_first_of(".eE") == std::string::npos; }

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

std::string_view kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "boolean";
    case Value::Kind::number: return "number";
    case Value::Kind::string: return "string";
    case Value::Kind::array: return "array";
    case Value::Kind::object: return "object";
  }
  return "?";
}

bool Value::as_bool() const {
  if (!is(Kind::boolean)) wrong_kind(Kind::boolean, kind());
  return std::get<bool>(v_);
}
const std::string& Value::as_string() const {
  if (!is(Kind::string)) wrong_kind(Kind::string, kind());
  return std::get<std::string>(v_);
}
const Array& Value::as_array() const {
  if (!is(Kind::array)) wrong_kind(Kind::array, kind());
  return std::get<Array>(v_);
}
const Object& Value::as_object() const {
  if (!is(Kind::object)) wrong_kind(Kind::object, kind());
  return std::get<Object>(v_);
}

std::optional<uint64_t> Value::as_uint64() const {
  if (!is(Kind::number)) wrong_kind(Kind::number, kind());
  const std::string& t = std::get<Number>(v_).text;
  if (!is_integer_text(t) || t[0] == '-') return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> Value::as_int64() const {
  if (!is(Kind::number)) wrong_kind(Kind::number, kind());
  const std::string& t = std::get<Number>(v_).text;
  if (!is_integer_text(t)) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

double Value::as_double() const {
  if (!is(Kind::number)) wrong_kind(Kind::number, kind());
  // strtod, not from_chars: libstdc++ 12's double from_chars is fine too, but strtod is
  // what every platform has; the grammar was already checked by the parser.
  return std::strtod(std::get<Number>(v_).text.c_str(), nullptr);
}

const Value* Value::find(std::string_view key) const {
  if (!is(Kind::object)) return nullptr;
  for (const auto& [k, v] : std::get<Object>(v_))
    if (k == key) return &v;
  return nullptr;
}

Value parse(std::string_view text, const std::string& source, int max_depth) {
  return Parser(text, source, max_depth).parse_document();
}

std::string quote(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    const auto c = uint8_t(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace parley::io::json
