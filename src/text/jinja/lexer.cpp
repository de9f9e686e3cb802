// Jinja2's lexer (jinja2/lexer.py) re-done by hand: the same rule order, the same
// whitespace control, the same line counting, so that template data comes out byte-exact.
#include "text/jinja/lexer.h"

#include <cstring>

#include "text/jinja/value.h"

namespace parley::jinja {
namespace {

[[noreturn]] void lex_fail(const std::string& message, int line) {
  throw TemplateError{message, line, false};
}

// Decodes the UTF-8 character at s[pos]; sets len to its byte length.
char32_t char_at(const std::string& s, size_t pos, size_t& len) {
  unsigned char c = s[pos];
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (pos + n > s.size()) n = 1;
  len = n;
  if (n == 1) return c;
  std::u32string u = utf8_decode(std::string_view(s).substr(pos, n));
  return u.size() == 1 ? u[0] : 0xfffd;
}

// Python's \s* from pos.
size_t skip_space(const std::string& s, size_t pos) {
  while (pos < s.size()) {
    size_t len;
    if (!py_isspace(char_at(s, pos, len))) break;
    pos += len;
  }
  return pos;
}

std::string rstrip_space(const std::string& text) {
  std::u32string u = utf8_decode(text);
  size_t e = u.size();
  while (e > 0 && py_isspace(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(0, e));
}

bool all_space(std::string_view text) {
  if (text.empty()) return false;
  for (char32_t c : utf8_decode(text)) {
    if (!py_isspace(c)) return false;
  }
  return true;
}

int count_newlines(std::string_view s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to; ++i) n += s[i] == '\n';
  return n;
}

bool is_name_start(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool is_name_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

// Python's "unicode-escape" decoding of a string literal body.
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](int digits) {
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        if (i + 1 >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + 1])))
          lex_fail("truncated escape in a string literal", line);
        char h = body[++i];
        v = v * 16 +
            (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
      }
      return v;
    };
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': utf8_append(out, hex(2)); break;
      case 'u': utf8_append(out, hex(4)); break;
      case 'U': {
        uint32_t v = hex(8);
        if (v > 0x10ffff) lex_fail("illegal Unicode character in a string literal", line);
        utf8_append(out, v);
        break;
      }
      case 'N': fail_unsupported("\\N{...} escapes in string literals are not supported");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k)
            v = v * 8 + (body[++i] - '0');
          utf8_append(out, v);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& options) : s_(std::move(source)), opt_(options) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) lex_root();
    tokens_.push_back(Token{Tok::eof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  void emit(Tok type, std::string text, int line) {
    tokens_.push_back(Token{type, std::move(text), 0, 0, line});
  }

  // The text before a tag, after `-` / lstrip_blocks trimming (jinja2's OptionalLStrip).
  std::string strip_before(std::string text, char sign, bool variable) {
    if (sign == '-') {
      std::string stripped = rstrip_space(text);
      pending_newlines_ = count_newlines(text, stripped.size(), text.size());
      return stripped;
    }
    if (sign != '+' && opt_.lstrip_blocks && !variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) {
        text.resize(l_pos);
      }
    }
    return text;
  }

  void emit_data(const std::string& text) {
    if (!text.empty()) emit(Tok::data, text, line_);
    line_ += count_newlines(text, 0, text.size()) + pending_newlines_;
    pending_newlines_ = 0;
  }

  // Matches `{%(-|+|)\s*raw\s*(-%}\s*|%})` at p; returns the end of the match or npos.
  size_t match_raw_begin(size_t p, char& sign) {
    size_t q = p + 2;
    sign = 0;
    if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
    q = skip_space(s_, q);
    if (s_.compare(q, 3, "raw") != 0) return std::string::npos;
    q += 3;
    size_t after = q;
    q = skip_space(s_, q);
    if (q == after && q < s_.size() && is_name_char(s_[q])) return std::string::npos;
    if (s_.compare(q, 3, "-%}") == 0) return skip_space(s_, q + 3);
    if (s_.compare(q, 2, "%}") == 0) return q + 2;
    return std::string::npos;
  }

  void lex_root() {
    size_t p = pos_;
    while (true) {
      p = s_.find('{', p);
      if (p == std::string::npos || p + 1 >= s_.size()) {
        std::string text = s_.substr(pos_);
        emit_data(text);
        pos_ = s_.size();
        return;
      }
      char k = s_[p + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++p;
    }
    char kind = s_[p + 1];
    char raw_sign;
    size_t raw_end = kind == '%' ? match_raw_begin(p, raw_sign) : std::string::npos;
    char sign = 0;
    size_t after = p + 2;
    if (raw_end != std::string::npos) {
      sign = raw_sign;
    } else if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) {
      sign = s_[after++];
    }
    std::string text = strip_before(s_.substr(pos_, p - pos_), sign, kind == '{');
    emit_data(text);
    if (raw_end != std::string::npos) {
      line_starting_ = s_[raw_end - 1] == '\n';
      line_ += count_newlines(s_, p, raw_end);
      lex_raw(raw_end);
      return;
    }
    int tag_line = line_;
    line_ += count_newlines(s_, p, after);
    if (kind == '#') {
      lex_comment(after, tag_line);
    } else {
      emit(kind == '{' ? Tok::variable_begin : Tok::block_begin, "", tag_line);
      lex_tag(after, kind == '{');
    }
  }

  void lex_comment(size_t q, int tag_line) {
    for (size_t i = q; i + 1 < s_.size(); ++i) {
      size_t end = std::string::npos;
      if (s_[i] == '+' && s_.compare(i + 1, 2, "#}") == 0) {
        end = i + 3;
      } else if (s_[i] == '-' && s_.compare(i + 1, 2, "#}") == 0) {
        end = skip_space(s_, i + 3);
      } else if (s_[i] == '#' && s_[i + 1] == '}') {
        end = i + 2;
        if (opt_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
      }
      if (end != std::string::npos) {
        line_ += count_newlines(s_, q, end);
        line_starting_ = s_[end - 1] == '\n';
        pos_ = end;
        return;
      }
    }
    lex_fail("Missing end of comment tag", tag_line);
  }

  void lex_raw(size_t q) {
    for (size_t i = q; i + 1 < s_.size(); ++i) {
      if (s_[i] != '{' || s_[i + 1] != '%') continue;
      size_t k = i + 2;
      char sign = 0;
      if (k < s_.size() && (s_[k] == '-' || s_[k] == '+')) sign = s_[k++];
      k = skip_space(s_, k);
      if (s_.compare(k, 6, "endraw") != 0) continue;
      k = skip_space(s_, k + 6);
      size_t end;
      if (s_.compare(k, 3, "+%}") == 0) {
        end = k + 3;
      } else if (s_.compare(k, 3, "-%}") == 0) {
        end = skip_space(s_, k + 3);
      } else if (s_.compare(k, 2, "%}") == 0) {
        end = k + 2;
        if (opt_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
      } else {
        continue;
      }
      std::string text = strip_before(s_.substr(q, i - q), sign, false);
      emit_data(text);
      line_ += count_newlines(s_, i, end);
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    lex_fail("Missing end of raw directive", line_);
  }

  // Tokens inside {{ }} / {% %} up to the end tag at bracket depth 0.
  void lex_tag(size_t q, bool variable) {
    std::vector<char> balance;
    int begin_line = line_;
    while (true) {
      if (q >= s_.size()) {
        lex_fail(variable ? "unexpected end of template, expected end of print statement"
                          : "unexpected end of template, expected end of statement block",
                 begin_line);
      }
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (variable) {
          if (s_.compare(q, 3, "-}}") == 0) {
            end = skip_space(s_, q + 3);
          } else if (s_.compare(q, 2, "}}") == 0) {
            end = q + 2;
          }
        } else {
          if (s_.compare(q, 3, "+%}") == 0) {
            end = q + 3;
          } else if (s_.compare(q, 3, "-%}") == 0) {
            end = skip_space(s_, q + 3);
          } else if (s_.compare(q, 2, "%}") == 0) {
            end = q + 2;
            if (opt_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
          }
        }
        if (end != std::string::npos) {
          emit(variable ? Tok::variable_end : Tok::block_end, "", line_);
          line_ += count_newlines(s_, q, end);
          line_starting_ = s_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      size_t len;
      char32_t c = char_at(s_, q, len);
      if (py_isspace(c)) {
        size_t e = skip_space(s_, q);
        line_ += count_newlines(s_, q, e);
        q = e;
        continue;
      }
      if (size_t e = match_number(q); e != q) {
        q = e;
        continue;
      }
      unsigned char b = s_[q];
      if (is_name_start(b)) {
        size_t e = q;
        while (e < s_.size() && is_name_char(s_[e])) ++e;
        emit(Tok::name, s_.substr(q, e - q), line_);
        q = e;
        continue;
      }
      if (b == '\'' || b == '"') {
        size_t e = q + 1;
        while (e < s_.size() && s_[e] != static_cast<char>(b)) e += s_[e] == '\\' ? 2 : 1;
        if (e >= s_.size()) lex_fail("unexpected end of string literal", line_);
        int line = line_;
        std::string body = s_.substr(q + 1, e - q - 1);
        emit(Tok::string, unescape(body, line), line);
        line_ += count_newlines(s_, q, e);
        q = e + 1;
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                         "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                         ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
      const char* op = nullptr;
      for (const char* o : kOps) {
        if (s_.compare(q, std::strlen(o), o) == 0) {
          op = o;
          break;
        }
      }
      if (!op) {
        lex_fail("unexpected char '" + s_.substr(q, len) + "'", line_);
      }
      std::string o(op);
      if (o == "{" || o == "(" || o == "[") {
        balance.push_back(o == "{" ? '}' : o == "(" ? ')' : ']');
      } else if (o == "}" || o == ")" || o == "]") {
        if (balance.empty()) lex_fail("unexpected '" + o + "'", line_);
        if (balance.back() != o[0]) {
          lex_fail("unexpected '" + o + "', expected '" + std::string(1, balance.back()) + "'",
                   line_);
        }
        balance.pop_back();
      }
      emit(Tok::op, o, line_);
      q += o.size();
    }
  }

  // jinja2's float_re then integer_re at q (underscores allowed between digits). Returns
  // the end of the number token it emitted, or q when none starts there.
  size_t match_number(size_t q) {
    auto digits = [&](size_t i) {  // (\d+_)*\d+
      size_t start = i;
      while (i < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i])) ||
                               (s_[i] == '_' && i > start && i + 1 < s_.size() &&
                                std::isdigit(static_cast<unsigned char>(s_[i + 1])))))
        ++i;
      return i;
    };
    if (!std::isdigit(static_cast<unsigned char>(s_[q]))) return q;
    auto strip_us = [](std::string t) {
      std::string out;
      for (char c : t)
        if (c != '_') out.push_back(c);
      return out;
    };
    bool after_dot = q > 0 && s_[q - 1] == '.';
    size_t int_end = digits(q);
    if (!after_dot) {
      size_t e = int_end;
      bool is_float = false;
      if (e + 1 < s_.size() && s_[e] == '.' &&
          std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
        e = digits(e + 1);
        is_float = true;
      }
      if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
        size_t x = e + 1;
        if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
        if (x < s_.size() && std::isdigit(static_cast<unsigned char>(s_[x]))) {
          e = digits(x);
          is_float = true;
        }
      }
      if (is_float) {
        Token t{Tok::floating, s_.substr(q, e - q), 0, 0, line_};
        t.float_value = std::stod(strip_us(t.text));
        tokens_.push_back(t);
        return e;
      }
    }
    // integer_re: 0b / 0o / 0x prefixes, [1-9](_?\d)*, 0(_?0)*
    size_t e;
    int base = 10;
    std::string body;
    if (s_[q] == '0' && q + 2 < s_.size() && std::strchr("bBoOxX", s_[q + 1]) && s_[q + 1] != 0) {
      char p = std::tolower(s_[q + 1]);
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      e = q + 2;
      auto ok = [&](char c) {
        return base == 16 ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                          : (c >= '0' && c < '0' + base);
      };
      while (e < s_.size() && (ok(s_[e]) || (s_[e] == '_' && e + 1 < s_.size() && ok(s_[e + 1]))))
        ++e;
      if (e == q + 2) {
        e = q + 1;
        base = 10;
      }
    } else if (s_[q] == '0') {
      e = q + 1;
      while (e < s_.size() &&
             (s_[e] == '0' || (s_[e] == '_' && e + 1 < s_.size() && s_[e + 1] == '0')))
        ++e;
    } else {
      e = int_end;
    }
    body = strip_us(s_.substr(base == 10 ? q : q + 2, e - (base == 10 ? q : q + 2)));
    Token t{Tok::integer, s_.substr(q, e - q), 0, 0, line_};
    try {
      t.int_value = std::stoll(body, nullptr, base);
    } catch (const std::exception&) {
      fail_unsupported("integer literal " + t.text + " does not fit in 64 bits");
    }
    tokens_.push_back(t);
    return e;
  }

  std::string s_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  int pending_newlines_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexOptions& options) {
  return Lexer(normalize_newlines(source), options).run();
}

}  // namespace parley::jinja
