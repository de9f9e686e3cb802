// CPython's str, dict and list methods as ImmutableSandboxedEnvironment exposes them:
// bound methods for the safe ones, an Undefined that raises SecurityError's message for
// the mutating ones (list.append, dict.pop, ...); and Python-style argument binding.
#include <algorithm>
#include <map>
#include <set>

#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/py_strings.h"

namespace parley::jinja {

std::vector<Value> bind_args(const std::string& fn, Args& args, const std::vector<Param>& params) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.positional.size() > params.size()) {
    fail(fn + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
         std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (auto& [k, v] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && k != params[i].name) ++i;
    if (i == params.size()) fail(fn + "() got an unexpected keyword argument '" + k + "'");
    if (out[i]) fail(fn + "() got multiple values for argument '" + k + "'");
    out[i] = v;
  }
  std::vector<Value> result;
  result.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!out[i]) {
      if (!params[i].default_value) {
        fail(fn + "() missing required argument '" + std::string(params[i].name) + "'");
      }
      out[i] = *params[i].default_value;
    }
    result.push_back(std::move(*out[i]));
  }
  return result;
}

namespace {

template <class Pred>
bool all_chars(const std::string& s, Pred p) {
  std::u32string u = utf8_decode(s);
  if (u.empty()) return false;
  return std::all_of(u.begin(), u.end(), p);
}

Value bound(const std::string& name, std::function<Value(Interpreter&, Args&)> fn) {
  return Value::callable(name, std::move(fn));
}

std::optional<Value> string_method(const Value& self, const std::string& name) {
  const std::string s = self.str();
  bool safe = self.safe();
  auto str_result = [safe](std::string r) { return Value::string(std::move(r), safe); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"chars", kNone}});
      return str_result(py_strip(s, p[0], l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"sep", kNone}, {"maxsplit", I(-1)}});
      ValueList parts = py_split(s, p[0], as_int_arg(p[1], "maxsplit"), right);
      if (safe) {
        for (Value& v : parts) v = Value::string(v.str(), true);
      }
      return Value::list(std::move(parts));
    });
  }
  if (name == "splitlines") {
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"keepends", kFalse}});
      if (truthy(p[0])) fail_unsupported("splitlines(keepends=True)");
      ValueList out;
      for (auto& line : py_splitlines(s)) out.push_back(str_result(line));
      return Value::list(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"prefix", std::nullopt}, {"start", kNone}, {"end", kNone}});
      if (!p[1].is_none() || !p[2].is_none()) fail_unsupported(name + " with start/end");
      return Value::boolean(match_affix(s, p[0], prefix));
    });
  }
  using StrFn = std::string (*)(const std::string&);
  static const std::map<std::string, StrFn> kUnary = {
      {"upper", [](const std::string& x) { return py_upper_str(x); }},
      {"lower", [](const std::string& x) { return py_lower_str(x); }},
      {"casefold", [](const std::string& x) { return py_lower_str(x); }},
      {"title", py_title},
      {"capitalize", py_capitalize},
      {"swapcase",
       [](const std::string& x) {
         std::string out;
         for (char32_t c : utf8_decode(x))
           utf8_append(out, py_lower(c) != c ? py_lower(c) : py_upper(c));
         return out;
       }},
  };
  if (auto it = kUnary.find(name); it != kUnary.end()) {
    StrFn f = it->second;
    return bound(name, [=](Interpreter&, Args& a) {
      bind_args(name, a, {});
      return str_result(f(s));
    });
  }
  using PredFn = bool (*)(char32_t);
  static const std::map<std::string, PredFn> kPreds = {
      {"isdigit", [](char32_t c) { return py_isdigit(c); }},
      {"isdecimal", [](char32_t c) { return py_isdigit(c); }},
      {"isnumeric", [](char32_t c) { return py_isdigit(c); }},
      {"isalpha", [](char32_t c) { return py_isalpha(c); }},
      {"isalnum", [](char32_t c) { return py_isalpha(c) || py_isdigit(c); }},
      {"isspace", [](char32_t c) { return py_isspace(c); }},
      {"isascii", [](char32_t c) { return c < 0x80; }},
  };
  if (auto it = kPreds.find(name); it != kPreds.end()) {
    PredFn f = it->second;
    return bound(name, [=](Interpreter&, Args& a) {
      bind_args(name, a, {});
      if (name == "isascii" && s.empty()) return kTrue;
      return Value::boolean(all_chars(s, f));
    });
  }
  if (name == "islower" || name == "isupper") {
    bool lower = name == "islower";
    return bound(name, [=](Interpreter&, Args& a) {
      bind_args(name, a, {});
      bool any_cased = false;
      for (char32_t c : utf8_decode(s)) {
        if (!is_cased(c)) continue;
        any_cased = true;
        if (lower ? py_lower(c) != c : py_upper(c) != c) return kFalse;
      }
      return Value::boolean(any_cased);
    });
  }
  if (name == "replace") {
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", I(-1)}});
      if (!p[0].is_string() || !p[1].is_string()) fail("replace() arguments must be str");
      return str_result(py_replace(s, p[0].str(), p[1].str(), as_int_arg(p[2], "count")));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool rev = name[0] == 'r';
    bool raise = name.find("index") != std::string::npos;
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"sub", std::nullopt}, {"start", kNone}, {"end", kNone}});
      if (!p[1].is_none() || !p[2].is_none()) fail_unsupported(name + " with start/end");
      if (!p[0].is_string()) fail("must be str, not " + py_type_name(p[0]));
      int64_t r = find_in(s, p[0].str(), rev);
      if (r < 0 && raise) fail("substring not found");
      return I(r);
    });
  }
  if (name == "count") {
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"sub", std::nullopt}});
      if (!p[0].is_string()) fail("must be str, not " + py_type_name(p[0]));
      const std::string& sub = p[0].str();
      if (sub.empty()) return I(static_cast<int64_t>(utf8_decode(s).size()) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size()))
        ++n;
      return I(n);
    });
  }
  if (name == "join") {
    return bound(name, [=](Interpreter& in, Args& a) {
      auto p = bind_args(name, a, {{"iterable", std::nullopt}});
      std::string out;
      bool first = true;
      for (const Value& v : in.iterate(p[0])) {
        if (!v.is_string())
          fail("sequence item: expected str instance, " + py_type_name(v) + " found");
        if (!first) out += s;
        first = false;
        out += v.str();
      }
      return str_result(out);
    });
  }
  if (name == "format") {
    return bound(name, [=](Interpreter& in, Args& a) { return str_result(str_format(in, s, a)); });
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    char align = name == "center" ? '^' : name == "ljust" ? '<' : '>';
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"width", std::nullopt}, {"fillchar", S(" ")}});
      return str_result(pad(s, as_int_arg(p[0], name.c_str()), align, p[1].str()));
    });
  }
  if (name == "zfill") {
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"width", std::nullopt}});
      int64_t w = as_int_arg(p[0], "zfill");
      bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      std::string body = sign ? s.substr(1) : s;
      std::string padded = pad(body, w - (sign ? 1 : 0), '>', "0");
      return str_result(sign ? s.substr(0, 1) + padded : padded);
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    bool prefix = name == "removeprefix";
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"affix", std::nullopt}});
      if (!p[0].is_string()) fail("must be str");
      if (!match_affix(s, p[0], prefix)) return str_result(s);
      size_t n = p[0].str().size();
      return str_result(prefix ? s.substr(n) : s.substr(0, s.size() - n));
    });
  }
  if (name == "partition" || name == "rpartition") {
    bool rev = name == "rpartition";
    return bound(name, [=](Interpreter&, Args& a) {
      auto p = bind_args(name, a, {{"sep", std::nullopt}});
      if (!p[0].is_string() || p[0].str().empty()) fail("empty separator");
      const std::string& d = p[0].str();
      size_t f = rev ? s.rfind(d) : s.find(d);
      if (f == std::string::npos) {
        return rev ? Value::tuple({str_result(""), str_result(""), str_result(s)})
                   : Value::tuple({str_result(s), str_result(""), str_result("")});
      }
      return Value::tuple(
          {str_result(s.substr(0, f)), str_result(d), str_result(s.substr(f + d.size()))});
    });
  }
  static const std::set<std::string> kOther = {"encode",       "expandtabs",  "format_map",
                                               "isidentifier", "isprintable", "istitle",
                                               "maketrans",    "translate"};
  if (kOther.count(name)) {
    return bound(name, [name](Interpreter&, Args&) -> Value {
      fail_unsupported("str." + name + "() is not supported");
    });
  }
  return std::nullopt;
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined_hint("access to attribute '" + name + "' of '" + py_type_name(obj) +
                               "' object is unsafe.");
}

}  // namespace

std::optional<Value> python_attribute(const Value& obj, const std::string& name) {
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return unsafe(obj, name);
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_dict()) {
    Value self = obj;
    if (name == "get") {
      return bound(name, [self](Interpreter&, Args& a) {
        auto p = bind_args("get", a, {{"key", std::nullopt}, {"default", kNone}});
        long i = self.dict_data().find(p[0]);
        return i >= 0 ? self.dict_data().items[i].second : p[1];
      });
    }
    if (name == "items") {
      return bound(name, [self](Interpreter&, Args& a) {
        bind_args("items", a, {});
        return Value::list(dict_pairs(self));
      });
    }
    if (name == "keys" || name == "values") {
      bool keys = name == "keys";
      return bound(name, [self, keys](Interpreter&, Args& a) {
        bind_args(keys ? "keys" : "values", a, {});
        ValueList out;
        for (const auto& [k, v] : self.dict_data().items) out.push_back(keys ? k : v);
        return Value::list(std::move(out));
      });
    }
    if (name == "copy") {
      return bound(name, [self](Interpreter&, Args& a) {
        bind_args("copy", a, {});
        Value d = Value::dict();
        d.dict_data().items = self.dict_data().items;
        return d;
      });
    }
    if (name == "fromkeys") {
      return bound(name, [](Interpreter&, Args&) -> Value {
        fail_unsupported("dict.fromkeys() is not supported");
      });
    }
    if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
        name == "clear")
      return unsafe(obj, name);
    return std::nullopt;
  }
  if (obj.is_sequence()) {
    Value self = obj;
    if (name == "index" || name == "count") {
      bool index = name == "index";
      return bound(name, [self, index](Interpreter&, Args& a) {
        auto p = bind_args(index ? "index" : "count", a, {{"value", std::nullopt}});
        int64_t n = 0;
        const ValueList& items = self.items();
        for (size_t i = 0; i < items.size(); ++i) {
          if (!py_eq(items[i], p[0])) continue;
          if (index) return I(static_cast<int64_t>(i));
          ++n;
        }
        if (index) fail(py_repr(p[0]) + " is not in list");
        return I(n);
      });
    }
    if (obj.kind() == Kind::list) {
      if (name == "copy") {
        return bound(name, [self](Interpreter&, Args&) { return Value::list(self.items()); });
      }
      static const std::set<std::string> kMutating = {"append", "clear",  "extend",  "insert",
                                                      "pop",    "remove", "reverse", "sort"};
      if (kMutating.count(name)) return unsafe(obj, name);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace parley::jinja
