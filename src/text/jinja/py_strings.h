// Python str algorithms shared by the str methods, the filters and the globals: split,
// replace, title, padding, str.format's mini-language and printf-style %, with CPython's
// results on UTF-8 text (lengths and positions count code points).
#pragma once

#include <cstdint>
#include <string>

#include "text/jinja/value.h"

namespace parley::jinja {

inline const Value kNone = Value::none();
inline const Value kFalse = Value::boolean(false);
inline const Value kTrue = Value::boolean(true);
inline Value S(const char* s) { return Value::string(s); }
inline Value I(int64_t i) { return Value::integer(i); }

Value str_of(const Value& v);  // jinja2's soft_str: str() that keeps Markup
int64_t py_len(const Value& v);
int64_t as_int_arg(const Value& v, const char* what);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count);
ValueList py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool right);
bool is_cased(char32_t c);
std::string py_title(const std::string& s);       // str.title()
std::string py_capitalize(const std::string& s);  // str.capitalize()
// Pads s to width code points; align '<', '>' or '^' (str.center's split of the margin).
std::string pad(const std::string& s, int64_t width, char align, const std::string& fill);
std::string format_spec(const Value& v, const std::string& spec);             // format(v, spec)
std::string str_format(Interpreter& in, const std::string& fmt, Args& args);  // str.format
int64_t find_in(const std::string& s, const std::string& sub, bool reverse);  // str.find
bool match_affix(const std::string& s, const Value& affix, bool prefix);      // startswith
ValueList dict_pairs(const Value& d);  // dict.items() as (key, value) tuples
// Python's printf-style `fmt % args` (%s %r %d %i %x %f %e %g %%, %(name)s with a dict).
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace parley::jinja
