// jinja2's builtin filters and tests (jinja2/filters.py, jinja2/tests.py) with
// transformers' tojson (json.dumps with ensure_ascii=False, unsorted keys, indent and
// separators), resolved by name at parse time.
#include <algorithm>
#include <cmath>
#include <map>

#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/py_strings.h"

namespace parley::jinja {

namespace {

// ---- helpers for filters ----

Value attr_lookup(Interpreter& in, const Value& item, const Value& attribute,
                  const Value* dflt = nullptr) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const Value& p : py_split(attribute.str(), S("."), -1, false)) {
      const std::string& t = p.str();
      bool digits = !t.empty() && std::all_of(t.begin(), t.end(), ::isdigit);
      parts.push_back(digits ? I(std::stoll(t)) : p);
    }
  } else {
    parts.push_back(attribute);
  }
  Value v = item;
  for (const Value& p : parts) {
    v = in.getitem(v, p);
    if (dflt && v.is_undefined()) v = *dflt;
  }
  return v;
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower_str(v.str()));
  return v;
}

Value get_kw(Args& a, const char* name, const Value& dflt) {
  for (auto it = a.keyword.begin(); it != a.keyword.end(); ++it) {
    if (it->first == name) {
      Value v = it->second;
      a.keyword.erase(it);
      return v;
    }
  }
  return dflt;
}

// ---- filters ----

Value f_tojson(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args(
      "tojson", a,
      {{"ensure_ascii", kFalse}, {"indent", kNone}, {"separators", kNone}, {"sort_keys", kFalse}});
  JsonDumpOptions o;
  o.ensure_ascii = truthy(p[0]);
  if (!p[1].is_none()) {
    o.has_indent = true;
    if (p[1].is_string()) {
      o.indent = p[1].str();
    } else {
      o.indent = std::string(std::max<int64_t>(0, as_int_arg(p[1], "indent")), ' ');
    }
    o.item_separator = ",";
  }
  if (!p[2].is_none()) {
    ValueList seps = p[2].is_sequence() ? p[2].items() : ValueList{};
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      fail("separators must be a pair of strings");
    }
    o.item_separator = seps[0].str();
    o.key_separator = seps[1].str();
  }
  o.sort_keys = truthy(p[3]);
  return Value::string(json_dumps(v, o));
}

Value f_length(Interpreter&, const Value& v, Args& a) {
  bind_args("length", a, {});
  return I(py_len(v));
}

Value f_string(Interpreter&, const Value& v, Args& a) {
  bind_args("string", a, {});
  return str_of(v);
}

Value f_trim(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("trim", a, {{"chars", kNone}});
  Value s = str_of(v);
  return Value::string(py_strip(s.str(), p[0], true, true), s.safe());
}

Value f_upper(Interpreter&, const Value& v, Args& a) {
  bind_args("upper", a, {});
  Value s = str_of(v);
  return Value::string(py_upper_str(s.str()), s.safe());
}

Value f_lower(Interpreter&, const Value& v, Args& a) {
  bind_args("lower", a, {});
  Value s = str_of(v);
  return Value::string(py_lower_str(s.str()), s.safe());
}

Value f_capitalize(Interpreter&, const Value& v, Args& a) {
  bind_args("capitalize", a, {});
  Value s = str_of(v);
  return Value::string(py_capitalize(s.str()), s.safe());
}

Value f_title(Interpreter&, const Value& v, Args& a) {
  bind_args("title", a, {});
  // jinja2 splits at runs of [-\s({\[<] and capitalizes each piece.
  std::u32string u = utf8_decode(py_str(v));
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
  };
  std::string out;
  bool start = true;
  for (char32_t c : u) {
    if (is_sep(c)) {
      utf8_append(out, c);
      start = true;
    } else {
      utf8_append(out, start ? py_upper(c) : py_lower(c));
      start = false;
    }
  }
  return Value::string(out, v.safe());
}

Value f_default(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("default", a, {{"default_value", S("")}, {"boolean", kFalse}});
  if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
  return v;
}

Value f_join(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("join", a, {{"d", S("")}, {"attribute", kNone}});
  std::string sep = py_str(p[0]), out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(p[1].is_none() ? item : attr_lookup(in, item, p[1]));
  }
  return Value::string(std::move(out));
}

Value f_items(Interpreter&, const Value& v, Args& a) {
  bind_args("items", a, {});
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  return Value::generator(dict_pairs(v));
}

Value f_list(Interpreter& in, const Value& v, Args& a) {
  bind_args("list", a, {});
  return Value::list(in.iterate(v));
}

Value f_safe(Interpreter&, const Value& v, Args& a) {
  bind_args("safe", a, {});
  return Value::string(py_str(v), true);
}

Value f_escape(Interpreter&, const Value& v, Args& a) {
  bind_args("escape", a, {});
  if (v.is_string() && v.safe()) return v;
  return Value::string(html_escape(py_str(v)), true);
}

Value f_replace(Interpreter&, const Value& v, Args& a) {
  auto p =
      bind_args("replace", a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", kNone}});
  int64_t count = p[2].is_none() ? -1 : as_int_arg(p[2], "count");
  return Value::string(py_replace(py_str(v), py_str(p[0]), py_str(p[1]), count));
}

Value f_dictsort(Interpreter&, const Value& v, Args& a) {
  auto p =
      bind_args("dictsort", a, {{"case_sensitive", kFalse}, {"by", S("key")}, {"reverse", kFalse}});
  if (!v.is_dict()) fail("dictsort requires a mapping, got " + py_type_name(v));
  int pos;
  if (py_str(p[1]) == "key") {
    pos = 0;
  } else if (py_str(p[1]) == "value") {
    pos = 1;
  } else {
    fail("You can only sort by either \"key\" or \"value\"");
  }
  ValueList pairs = dict_pairs(v);
  bool cs = truthy(p[0]), rev = truthy(p[2]);
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(x.items()[pos], cs), ky = sort_key(y.items()[pos], cs);
    return rev ? py_lt(ky, kx) : py_lt(kx, ky);
  });
  return Value::list(std::move(pairs));
}

Value select_impl(Interpreter& in, const Value& v, Args& a, bool lookup_attr, bool keep) {
  if (!truthy(v)) return Value::generator({});  // jinja2 tests `if value:` first
  size_t off = 0;
  Value attribute;
  if (lookup_attr) {
    if (a.positional.empty()) fail("Missing parameter for attribute name");
    attribute = a.positional[0];
    off = 1;
  }
  bool has_test = a.positional.size() > off;
  std::string test = has_test ? py_str(a.positional[off]) : "";
  Args test_args;
  if (has_test) {
    test_args.positional.assign(a.positional.begin() + off + 1, a.positional.end());
    test_args.keyword = a.keyword;
  }
  ValueList out;
  for (const Value& item : in.iterate(v)) {
    Value x = lookup_attr ? attr_lookup(in, item, attribute) : item;
    bool ok;
    if (has_test) {
      Args copy = test_args;
      ok = in.apply_test(test, x, copy);
    } else {
      ok = truthy(x);
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, Args& a) {
  return select_impl(in, v, a, false, true);
}
Value f_reject(Interpreter& in, const Value& v, Args& a) {
  return select_impl(in, v, a, false, false);
}
Value f_selectattr(Interpreter& in, const Value& v, Args& a) {
  return select_impl(in, v, a, true, true);
}
Value f_rejectattr(Interpreter& in, const Value& v, Args& a) {
  return select_impl(in, v, a, true, false);
}

Value f_map(Interpreter& in, const Value& v, Args& a) {
  ValueList out;
  if (!truthy(v)) return Value::generator({});  // jinja2 tests `if value:` first
  if (a.positional.empty()) {
    Value attribute = get_kw(a, "attribute", Value());
    if (attribute.is_undefined()) fail("map requires a filter argument");
    Value dflt = get_kw(a, "default", kNone);
    if (!a.keyword.empty()) fail("Unexpected keyword argument '" + a.keyword[0].first + "'");
    for (const Value& item : in.iterate(v)) {
      out.push_back(attr_lookup(in, item, attribute, dflt.is_none() ? nullptr : &dflt));
    }
    return Value::generator(std::move(out));
  }
  std::string filter = py_str(a.positional[0]);
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : in.iterate(v)) {
    Args copy = rest;
    out.push_back(in.apply_filter(filter, item, copy));
  }
  return Value::generator(std::move(out));
}

Value f_indent(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("indent", a, {{"width", I(4)}, {"first", kFalse}, {"blank", kFalse}});
  std::string ind = p[0].is_string()
                        ? p[0].str()
                        : std::string(std::max<int64_t>(0, as_int_arg(p[0], "width")), ' ');
  Value s = str_of(v);
  std::vector<std::string> lines = py_splitlines(s.str() + "\n");
  std::string rv;
  if (truthy(p[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t i = 1; i < lines.size(); ++i) {
        if (i > 1) rv += "\n";
        rv += lines[i].empty() ? lines[i] : ind + lines[i];
      }
    }
  }
  if (truthy(p[1])) rv = ind + rv;
  return Value::string(rv, s.safe());
}

// Python int(str): optional sign, digits with single underscores, surrounding whitespace.
bool parse_py_int(const std::string& text, int64_t base, int64_t& out) {
  std::string t = py_strip(text, kNone, true, true);
  std::string digits;
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (base == 16 && t.compare(i, 2, "0x") == 0) i += 2;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && !digits.empty() && i + 1 < t.size() && t[i + 1] != '_') continue;
    digits.push_back(t[i]);
  }
  if (digits.empty()) return false;
  try {
    size_t used;
    long long v = std::stoll(digits, &used, static_cast<int>(base));
    if (used != digits.size()) return false;
    out = neg ? -v : v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool parse_py_float(const std::string& text, double& out) {
  std::string t = py_strip(text, kNone, true, true);
  if (t.empty()) return false;
  try {
    size_t used;
    out = std::stod(t, &used);
    return used == t.size();
  } catch (const std::exception&) {
    return false;
  }
}

Value f_int(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("int", a, {{"default", I(0)}, {"base", I(10)}});
  if (v.is_int()) return I(v.as_int());
  if (v.kind() == Kind::floating) {
    if (!std::isfinite(v.as_double())) return p[0];
    return I(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    int64_t i;
    if (parse_py_int(v.str(), as_int_arg(p[1], "base"), i)) return I(i);
    double d;
    if (parse_py_float(v.str(), d) && std::isfinite(d)) return I(static_cast<int64_t>(d));
  }
  return p[0];
}

Value f_float(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("float", a, {{"default", Value::floating(0.0)}});
  if (v.is_number()) return Value::floating(v.as_double());
  double d;
  if (v.is_string() && parse_py_float(v.str(), d)) return Value::floating(d);
  return p[0];
}

Value f_abs(Interpreter&, const Value& v, Args& a) {
  bind_args("abs", a, {});
  if (v.is_int()) return I(std::llabs(v.as_int()));
  if (v.kind() == Kind::floating) return Value::floating(std::fabs(v.as_double()));
  fail("bad operand type for abs(): '" + py_type_name(v) + "'");
}

Value f_round(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("round", a, {{"precision", I(0)}, {"method", S("common")}});
  if (!v.is_number()) fail("type " + py_type_name(v) + " doesn't define __round__ method");
  double x = v.as_double();
  double scale = std::pow(10.0, static_cast<double>(as_int_arg(p[0], "precision")));
  std::string method = py_str(p[1]);
  double r;
  if (method == "common") {
    r = std::nearbyint(x * scale) / scale;  // round-half-even, as Python's round()
  } else if (method == "ceil") {
    r = std::ceil(x * scale) / scale;
  } else if (method == "floor") {
    r = std::floor(x * scale) / scale;
  } else {
    fail("method must be common, ceil or floor");
  }
  return Value::floating(r);
}

Value f_first(Interpreter& in, const Value& v, Args& a) {
  bind_args("first", a, {});
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined_hint("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter& in, const Value& v, Args& a) {
  bind_args("last", a, {});
  if (v.kind() == Kind::generator) fail("'generator' object is not reversible");
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined_hint("No last item, sequence was empty.");
  return items.back();
}

Value f_reverse(Interpreter& in, const Value& v, Args& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(utf8_encode(u), v.safe());
  }
  ValueList items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::generator(std::move(items));
}

Value f_sum(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("sum", a, {{"attribute", kNone}, {"start", I(0)}});
  Value total = p[1];
  for (const Value& item : in.iterate(v)) {
    Value x = p[0].is_none() ? item : attr_lookup(in, item, p[0]);
    if (!total.is_number() || !x.is_number()) {
      fail("unsupported operand type(s) for +: '" + py_type_name(total) + "' and '" +
           py_type_name(x) + "'");
    }
    total = total.is_int() && x.is_int() ? I(total.as_int() + x.as_int())
                                         : Value::floating(total.as_double() + x.as_double());
  }
  return total;
}

ValueList sorted_items(Interpreter& in, const Value& v, bool reverse, bool case_sensitive,
                       const Value& attribute) {
  ValueList items = in.iterate(v);
  auto key = [&](const Value& x) {
    return sort_key(attribute.is_none() ? x : attr_lookup(in, x, attribute), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? py_lt(key(y), key(x)) : py_lt(key(x), key(y));
  });
  return items;
}

Value f_sort(Interpreter& in, const Value& v, Args& a) {
  auto p =
      bind_args("sort", a, {{"reverse", kFalse}, {"case_sensitive", kFalse}, {"attribute", kNone}});
  return Value::list(sorted_items(in, v, truthy(p[0]), truthy(p[1]), p[2]));
}

Value f_unique(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("unique", a, {{"case_sensitive", kFalse}, {"attribute", kNone}});
  ValueList out, seen;
  for (const Value& item : in.iterate(v)) {
    Value k = sort_key(p[1].is_none() ? item : attr_lookup(in, item, p[1]), truthy(p[0]));
    bool dup = false;
    for (const Value& s : seen) {
      if (py_eq(s, k)) {
        dup = true;
        break;
      }
    }
    if (dup) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, Args& a, bool max) {
  auto p = bind_args(max ? "max" : "min", a, {{"case_sensitive", kFalse}, {"attribute", kNone}});
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined_hint("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    return sort_key(p[1].is_none() ? x : attr_lookup(in, x, p[1]), truthy(p[0]));
  };
  Value best = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    if (max ? py_lt(key(best), key(items[i])) : py_lt(key(items[i]), key(best))) best = items[i];
  }
  return best;
}
Value f_min(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, true); }

Value f_batch(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("batch", a, {{"linecount", std::nullopt}, {"fill_with", kNone}});
  int64_t n = as_int_arg(p[0], "linecount");
  if (n <= 0) fail("batch size must be positive");
  ValueList out, cur;
  for (const Value& item : in.iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (!p[1].is_none()) {
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(p[1]);
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::generator(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, Args& a) {
  bind_args("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(py_str(v))) {
    bool w = py_isalpha(c) || py_isdigit(c) || c == '_' ||
             (c >= 0x80 && !py_isspace(c) && py_isprintable(c) && c > 0x2000);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return I(n);
}

Value f_center(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("center", a, {{"width", I(80)}});
  return Value::string(pad(py_str(v), as_int_arg(p[0], "width"), '^', " "));
}

Value f_striptags(Interpreter&, const Value& v, Args& a) {
  bind_args("striptags", a, {});
  std::string s = py_str(v), text;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 4, "<!--") == 0) {
      size_t e = s.find("-->", i);
      if (e == std::string::npos) break;
      i = e + 2;
    } else if (s[i] == '<') {
      size_t e = s.find('>', i);
      if (e == std::string::npos) {
        text += s.substr(i);
        break;
      }
      i = e;
    } else {
      text.push_back(s[i]);
    }
  }
  std::string out;
  for (const Value& w : py_split(text, kNone, -1, false)) out += (out.empty() ? "" : " ") + w.str();
  static const std::pair<const char*, const char*> kEntities[] = {{"&lt;", "<"},    {"&gt;", ">"},
                                                                  {"&quot;", "\""}, {"&#34;", "\""},
                                                                  {"&#39;", "'"},   {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities) out = py_replace(out, from, to, -1);
  return Value::string(out);
}

// jinja2's format filter: `value % (kwargs or args)`.
Value f_format(Interpreter&, const Value& v, Args& a) {
  if (!a.keyword.empty() && !a.positional.empty()) {
    fail("can't handle positional and keyword arguments at the same time");
  }
  Value args;
  if (!a.keyword.empty()) {
    args = Value::dict();
    for (auto& [k, val] : a.keyword) args.dict_data().set(Value::string(k), val);
  } else {
    args = Value::tuple(a.positional);
  }
  return Value::string(percent_format(py_str(v), args));
}

Value f_attr(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("attr", a, {{"name", std::nullopt}});
  return in.getattr(v, py_str(p[0]));
}

// ---- tests ----

bool t_defined(Interpreter&, const Value& v, Args& a) {
  bind_args("defined", a, {});
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, Args& a) {
  bind_args("undefined", a, {});
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, Args& a) {
  bind_args("none", a, {});
  return v.is_none();
}
bool t_string(Interpreter&, const Value& v, Args& a) {
  bind_args("string", a, {});
  return v.is_string();
}
bool t_number(Interpreter&, const Value& v, Args& a) {
  bind_args("number", a, {});
  return v.is_number();
}
bool t_integer(Interpreter&, const Value& v, Args& a) {
  bind_args("integer", a, {});
  return v.kind() == Kind::integer;
}
bool t_float(Interpreter&, const Value& v, Args& a) {
  bind_args("float", a, {});
  return v.kind() == Kind::floating;
}
bool t_mapping(Interpreter&, const Value& v, Args& a) {
  bind_args("mapping", a, {});
  return v.is_dict();
}
bool t_iterable(Interpreter&, const Value& v, Args& a) {
  bind_args("iterable", a, {});
  switch (v.kind()) {
    case Kind::undefined:
    case Kind::string:
    case Kind::list:
    case Kind::tuple:
    case Kind::generator:
    case Kind::dict:
    case Kind::object: return true;
    default: return false;
  }
}
bool t_sequence(Interpreter&, const Value& v, Args& a) {
  bind_args("sequence", a, {});
  switch (v.kind()) {
    case Kind::undefined:
    case Kind::string:
    case Kind::list:
    case Kind::tuple:
    case Kind::dict: return true;
    default: return false;
  }
}
bool t_boolean(Interpreter&, const Value& v, Args& a) {
  bind_args("boolean", a, {});
  return v.kind() == Kind::boolean;
}
bool t_true(Interpreter&, const Value& v, Args& a) {
  bind_args("true", a, {});
  return v.kind() == Kind::boolean && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, Args& a) {
  bind_args("false", a, {});
  return v.kind() == Kind::boolean && !v.as_bool();
}
int64_t int_mod(const Value& v, int64_t m) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number())
    fail("unsupported operand type(s) for %: '" + py_type_name(v) + "' and 'int'");
  if (v.is_int()) return ((v.as_int() % m) + m) % m;
  return std::fmod(v.as_double(), static_cast<double>(m)) == 0 ? 0 : 1;
}
bool t_even(Interpreter&, const Value& v, Args& a) {
  bind_args("even", a, {});
  return int_mod(v, 2) == 0;
}
bool t_odd(Interpreter&, const Value& v, Args& a) {
  bind_args("odd", a, {});
  return int_mod(v, 2) == 1;
}
bool t_divisibleby(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("divisibleby", a, {{"num", std::nullopt}});
  int64_t n = as_int_arg(p[0], "divisibleby");
  if (n == 0) fail("integer division or modulo by zero");
  return int_mod(v, n < 0 ? -n : n) == 0;
}
bool t_eq(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("eq", a, {{"other", std::nullopt}});
  return py_eq(v, p[0]);
}
bool t_ne(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("ne", a, {{"other", std::nullopt}});
  return !py_eq(v, p[0]);
}
bool ordered(const Value& x, const Value& y) {
  if (x.is_undefined()) fail_undefined(x);
  if (y.is_undefined()) fail_undefined(y);
  return py_lt(x, y);
}
bool t_lt(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("lt", a, {{"other", std::nullopt}});
  return ordered(v, p[0]);
}
bool t_le(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("le", a, {{"other", std::nullopt}});
  return ordered(v, p[0]) || py_eq(v, p[0]);
}
bool t_gt(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("gt", a, {{"other", std::nullopt}});
  return ordered(p[0], v);
}
bool t_ge(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("ge", a, {{"other", std::nullopt}});
  return ordered(p[0], v) || py_eq(v, p[0]);
}
bool t_in(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("in", a, {{"seq", std::nullopt}});
  const Value& seq = p[0];
  if (seq.is_string()) {
    if (!v.is_string()) fail("'in <string>' requires string as left operand");
    return seq.str().find(v.str()) != std::string::npos;
  }
  if (seq.is_dict()) return seq.dict_data().find(v) >= 0;
  for (const Value& x : in.iterate(seq)) {
    if (py_eq(x, v)) return true;
  }
  return false;
}
bool t_callable(Interpreter&, const Value& v, Args& a) {
  bind_args("callable", a, {});
  return v.kind() == Kind::callable || v.is_undefined() || v.kind() == Kind::object;
}
bool t_lower(Interpreter&, const Value& v, Args& a) {
  bind_args("lower", a, {});
  std::string s = py_str(v);
  return s == py_lower_str(s) && s != py_upper_str(s);
}
bool t_upper(Interpreter&, const Value& v, Args& a) {
  bind_args("upper", a, {});
  std::string s = py_str(v);
  return s == py_upper_str(s) && s != py_lower_str(s);
}
bool t_sameas(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("sameas", a, {{"other", std::nullopt}});
  const Value& o = p[0];
  if (v.kind() != o.kind()) return false;
  if (v.identity()) return v.identity() == o.identity();
  return py_eq(v, o);
}
bool t_escaped(Interpreter&, const Value& v, Args& a) {
  bind_args("escaped", a, {});
  return v.is_string() && v.safe();
}
bool t_filter(Interpreter&, const Value& v, Args& a) {
  bind_args("filter", a, {});
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, Args& a) {
  bind_args("test", a, {});
  return v.is_string() && find_test(v.str()) != nullptr;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  static const std::map<std::string, FilterFn> kFilters = {
      {"tojson", f_tojson},
      {"length", f_length},
      {"count", f_length},
      {"string", f_string},
      {"trim", f_trim},
      {"upper", f_upper},
      {"lower", f_lower},
      {"capitalize", f_capitalize},
      {"title", f_title},
      {"default", f_default},
      {"d", f_default},
      {"join", f_join},
      {"items", f_items},
      {"list", f_list},
      {"safe", f_safe},
      {"escape", f_escape},
      {"e", f_escape},
      {"forceescape", f_escape},
      {"replace", f_replace},
      {"dictsort", f_dictsort},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"map", f_map},
      {"indent", f_indent},
      {"int", f_int},
      {"float", f_float},
      {"abs", f_abs},
      {"round", f_round},
      {"first", f_first},
      {"last", f_last},
      {"reverse", f_reverse},
      {"sum", f_sum},
      {"sort", f_sort},
      {"unique", f_unique},
      {"min", f_min},
      {"max", f_max},
      {"batch", f_batch},
      {"wordcount", f_wordcount},
      {"center", f_center},
      {"striptags", f_striptags},
      {"attr", f_attr},
      {"format", f_format},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

TestFn find_test(const std::string& name) {
  static const std::map<std::string, TestFn> kTests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"even", t_even},
      {"odd", t_odd},
      {"divisibleby", t_divisibleby},
      {"equalto", t_eq},
      {"eq", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"callable", t_callable},
      {"lower", t_lower},
      {"upper", t_upper},
      {"sameas", t_sameas},
      {"escaped", t_escaped},
      {"filter", t_filter},
      {"test", t_test},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

}  // namespace parley::jinja
