// Python str algorithms (see py_strings.h).
#include "text/jinja/py_strings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "text/jinja/interpreter.h"

namespace parley::jinja {

Value str_of(const Value& v) {
  if (v.is_string()) return v;
  return Value::string(py_str(v));
}

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(utf8_decode(v.str()).size());
    case Kind::list:
    case Kind::tuple: return static_cast<int64_t>(v.items().size());
    case Kind::dict: return static_cast<int64_t>(v.dict_data().items.size());
    default: fail("object of type '" + py_type_name(v) + "' has no len()");
  }
}

int64_t as_int_arg(const Value& v, const char* what) {
  if (!v.is_int()) fail(std::string(what) + ": an integer is required, not " + py_type_name(v));
  return v.as_int();
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    std::u32string u = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (n < count) {
        out += repl;
        ++n;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (n < count) {
    size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += repl;
    pos = f + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

ValueList py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool right) {
  ValueList out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep.is_none() || sep.is_undefined()) {
    std::u32string u = utf8_decode(s);
    std::vector<std::u32string> parts;
    if (!right) {
      size_t i = 0;
      int64_t n = 0;
      while (true) {
        while (i < u.size() && py_isspace(u[i])) ++i;
        if (i >= u.size()) break;
        if (n >= maxsplit) {
          parts.push_back(u.substr(i));
          break;
        }
        size_t j = i;
        while (j < u.size() && !py_isspace(u[j])) ++j;
        parts.push_back(u.substr(i, j - i));
        ++n;
        i = j;
      }
    } else {
      long i = static_cast<long>(u.size()) - 1;
      int64_t n = 0;
      while (true) {
        while (i >= 0 && py_isspace(u[i])) --i;
        if (i < 0) break;
        if (n >= maxsplit) {
          parts.push_back(u.substr(0, i + 1));
          break;
        }
        long j = i;
        while (j >= 0 && !py_isspace(u[j])) --j;
        parts.push_back(u.substr(j + 1, i - j));
        ++n;
        i = j;
      }
      std::reverse(parts.begin(), parts.end());
    }
    for (auto& p : parts) out.push_back(Value::string(utf8_encode(p)));
    return out;
  }
  if (!sep.is_string()) fail("must be str or None, not " + py_type_name(sep));
  const std::string& d = sep.str();
  if (d.empty()) fail("empty separator");
  std::vector<std::string> parts;
  if (!right) {
    size_t pos = 0;
    int64_t n = 0;
    while (n < maxsplit) {
      size_t f = s.find(d, pos);
      if (f == std::string::npos) break;
      parts.push_back(s.substr(pos, f - pos));
      pos = f + d.size();
      ++n;
    }
    parts.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    while (n < maxsplit && end >= d.size()) {
      size_t f = s.rfind(d, end - d.size());
      if (f == std::string::npos) break;
      parts.push_back(s.substr(f + d.size(), end - f - d.size()));
      end = f;
      ++n;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

bool is_cased(char32_t c) { return py_lower(c) != c || py_upper(c) != c || c == 0xdf; }

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    bool cased = is_cased(c);
    utf8_append(out, cased ? (prev_cased ? py_lower(c) : py_upper(c)) : c);
    prev_cased = cased;
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::u32string u = utf8_decode(s);
  std::string out;
  for (size_t i = 0; i < u.size(); ++i) utf8_append(out, i == 0 ? py_upper(u[i]) : py_lower(u[i]));
  return out;
}

std::string pad(const std::string& s, int64_t width, char align, const std::string& fill) {
  int64_t len = static_cast<int64_t>(utf8_decode(s).size());
  if (width <= len) return s;
  int64_t marg = width - len;
  int64_t left = align == '<' ? 0 : align == '>' ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

// format(value, spec) for str.format: [[fill]align][sign][#][0][width][,][.precision][type].
std::string format_spec(const Value& v, const std::string& spec) {
  if (spec.empty()) return py_str(v);
  std::u32string u = utf8_decode(spec);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (u.size() >= 2 && is_align(u[1])) {
    fill.clear();
    utf8_append(fill, u[0]);
    align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && is_align(u[0])) {
    align = static_cast<char>(u[0]);
    i = 1;
  }
  char sign = 0;
  if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' ')) sign = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < u.size() && u[i] >= '0' && u[i] <= '9') width = width * 10 + (u[i++] - '0');
  int precision = -1;
  if (i < u.size() && u[i] == '.') {
    ++i;
    precision = 0;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9') precision = precision * 10 + (u[i++] - '0');
  }
  char type = i < u.size() ? static_cast<char>(u[i++]) : 0;
  if (i != u.size()) fail_unsupported("format spec '" + spec + "'");
  std::string body;
  if (v.is_string() || (!v.is_number() && !type)) {
    body = py_str(v);
    if (precision >= 0) body = utf8_encode(utf8_decode(body).substr(0, precision));
    return pad(body, width, align ? align : '<', fill);
  }
  if (!v.is_number()) fail_unsupported("format spec '" + spec + "' for " + py_type_name(v));
  char buf[512];
  bool neg = false;
  if (type == 'd' || (!type && v.is_int())) {
    int64_t x = v.is_int() ? v.as_int() : static_cast<int64_t>(v.as_double());
    neg = x < 0;
    body = std::to_string(neg ? -x : x);
  } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
    int64_t x = as_int_arg(v, "format");
    neg = x < 0;
    uint64_t ux = static_cast<uint64_t>(neg ? -x : x);
    if (type == 'b') {
      do {
        body.insert(body.begin(), static_cast<char>('0' + (ux & 1)));
        ux >>= 1;
      } while (ux);
    } else {
      std::snprintf(buf, sizeof buf,
                    type == 'o'   ? "%llo"
                    : type == 'x' ? "%llx"
                                  : "%llX",
                    static_cast<unsigned long long>(ux));
      body = buf;
    }
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == '%' ||
             type == 'g' || type == 'G' || (!type && v.kind() == Kind::floating)) {
    double x = v.as_double() * (type == '%' ? 100 : 1);
    neg = std::signbit(x);
    if (!type) {
      body = float_repr(std::fabs(x));
      if (precision >= 0) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, std::fabs(x));
        body = buf;
      }
    } else {
      std::string f = std::string("%.*") + (type == '%' ? 'f' : type);
      std::snprintf(buf, sizeof buf, f.c_str(), precision < 0 ? 6 : precision, std::fabs(x));
      body = buf;
      if (type == '%') body += "%";
    }
  } else {
    fail_unsupported("format spec '" + spec + "'");
  }
  std::string sign_str = neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
  if (align == '=') {
    int64_t w = width - static_cast<int64_t>(sign_str.size());
    return sign_str + pad(body, w, '>', fill);
  }
  return pad(sign_str + body, width, align ? align : '>', fill);
}

std::string str_format(Interpreter& in, const std::string& fmt, Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    size_t end = field.find_first_of(".[");
    std::string head = field.substr(0, end);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.positional.size()) fail("Replacement index out of range");
      v = args.positional[auto_index++];
    } else if (std::all_of(head.begin(), head.end(), ::isdigit)) {
      size_t k = std::stoul(head);
      if (k >= args.positional.size()) fail("Replacement index " + head + " out of range");
      v = args.positional[k];
    } else {
      auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                             [&](auto& kv) { return kv.first == head; });
      if (it == args.keyword.end()) fail("KeyError: '" + head + "'");
      v = it->second;
    }
    while (end != std::string::npos && end < field.size()) {
      if (field[end] == '.') {
        size_t n = field.find_first_of(".[", end + 1);
        v = in.getattr(v, field.substr(end + 1, n == std::string::npos ? n : n - end - 1));
        end = n;
      } else {
        size_t n = field.find(']', end);
        if (n == std::string::npos) fail("Missing ']' in format string");
        std::string key = field.substr(end + 1, n - end - 1);
        bool digits = !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit);
        v = in.getitem(v, digits ? I(std::stoll(key)) : Value::string(key));
        end = n + 1;
      }
    }
    if (conv == "r") {
      v = Value::string(py_repr(v));
    } else if (conv == "s") {
      v = Value::string(py_str(v));
    } else if (!conv.empty()) {
      fail("Unknown conversion specifier " + conv);
    }
    out += format_spec(v, spec);
  }
  return out;
}

int64_t find_in(const std::string& s, const std::string& sub, bool reverse) {
  size_t f = reverse ? s.rfind(sub) : s.find(sub);
  if (f == std::string::npos) return -1;
  return static_cast<int64_t>(utf8_decode(std::string_view(s).substr(0, f)).size());
}

bool match_affix(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) fail("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.kind() == Kind::tuple) {
    for (const Value& a : affix.items()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

ValueList dict_pairs(const Value& d) {
  ValueList out;
  for (const auto& [k, v] : d.dict_data().items) out.push_back(Value::tuple({k, v}));
  return out;
}

// Python's printf-style `str % args` for %s %r %d %i %f %x %%.
std::string percent_format(const std::string& fmt, const Value& args) {
  ValueList items;
  const Value* mapping = nullptr;
  if (args.kind() == Kind::tuple) {
    items = args.items();
  } else if (args.is_dict()) {
    mapping = &args;
  } else {
    items.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    Value arg;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) fail("format requires a mapping");
      std::string key = fmt.substr(i + 1, close - i - 1);
      long k = mapping->dict_data().find(key);
      if (k < 0) fail("KeyError: '" + key + "'");
      arg = mapping->dict_data().items[k].second;
      i = close + 1;
    } else {
      if (next >= items.size()) fail("not enough arguments for format string");
      arg = items[next++];
    }
    std::string spec;
    while (i < fmt.size() && std::string("-+ #0123456789.").find(fmt[i]) != std::string::npos)
      spec.push_back(fmt[i++]);
    if (i >= fmt.size()) fail("incomplete format");
    char conv = fmt[i];
    char buf[512];
    std::string cspec = "%" + spec;
    switch (conv) {
      case 's': {
        std::string s = py_str(arg);
        if (spec.empty()) {
          out += s;
        } else {
          std::snprintf(buf, sizeof buf, (cspec + "s").c_str(), s.c_str());
          out += buf;
        }
        break;
      }
      case 'r': out += py_repr(arg); break;
      case 'd':
      case 'i':
      case 'x':
      case 'X': {
        if (!arg.is_number())
          fail("%" + std::string(1, conv) + " format: a real number is required");
        int64_t v = arg.is_int() ? arg.as_int() : static_cast<int64_t>(arg.as_double());
        std::snprintf(buf, sizeof buf,
                      (cspec + "ll" + std::string(1, conv == 'i' ? 'd' : conv)).c_str(),
                      static_cast<long long>(v));
        out += buf;
        break;
      }
      case 'f':
      case 'e':
      case 'g': {
        if (!arg.is_number()) fail("must be real number, not " + py_type_name(arg));
        std::snprintf(buf, sizeof buf, (cspec + std::string(1, conv)).c_str(), arg.as_double());
        out += buf;
        break;
      }
      default: fail_unsupported(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (!mapping && next < items.size()) fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace parley::jinja
