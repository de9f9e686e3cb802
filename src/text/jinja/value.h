// The values a chat template computes with, modelled on the Python objects jinja2 hands a
// template: str (with markupsafe's Markup flag), int, float, bool, None, list, tuple, dict
// (insertion-ordered), jinja2's default Undefined, namespace() objects, callables (macros,
// builtins, bound methods) and opaque objects such as the `loop` variable. Printing,
// truthiness, equality, ordering and json.dumps follow CPython so that a render is
// byte-identical to transformers' jinja2 environment.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace parley::jinja {

// A failure inside the template language; the renderer adds the template name and line.
// kind: 0 = the template's error (raise_exception, TypeError, UndefinedError: the request
// or the template is wrong), 1 = parley does not support what the template asks for.
struct TemplateError {
  std::string message;
  int line = 0;
  bool unsupported = false;
};
[[noreturn]] void fail(const std::string& message);
[[noreturn]] void fail_unsupported(const std::string& message);

class Value;
class Interpreter;
using ValueList = std::vector<Value>;

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  // Index of the entry whose key equals `key` (Python equality: 1 == 1.0 == True), or -1.
  long find(const Value& key) const;
  long find(std::string_view key) const;
  void set(Value key, Value value);
};

struct CallableData {
  std::string name;
  std::function<Value(Interpreter&, Args&)> fn;
  bool is_macro = false;
};

// Objects with attributes only (the `loop` variable, cyclers): what Python would print
// as "<... object>".
struct ObjectData {
  virtual ~ObjectData() = default;
  virtual Value get_attr(const std::string& name) = 0;
  virtual std::string repr() const = 0;
};

struct UndefinedData {
  std::string name;        // the missing name or attribute
  std::string owner;       // Python's type description of the object it was read from
  bool has_owner = false;  // false: a plain missing variable
  bool element = false;    // a missing item (obj[0]) rather than an attribute
  std::string hint;        // a fixed message (sandbox refusals, empty first/last)
};

enum class Kind {
  undefined,
  none,
  boolean,
  integer,
  floating,
  string,
  list,
  tuple,
  generator,  // what map/select/items/unique/reverse return: one-shot, no len(), truthy
  dict,
  namespace_,
  callable,
  object
};

class Value {
 public:
  Value() = default;  // Undefined without a name
  static Value none() { return Value(Kind::none); }
  static Value boolean(bool b) {
    Value v(Kind::boolean);
    v.i_ = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::integer);
    v.i_ = i;
    return v;
  }
  static Value floating(double f) {
    Value v(Kind::floating);
    v.f_ = f;
    return v;
  }
  static Value string(std::string s, bool safe = false) {
    Value v(Kind::string);
    v.s_ = std::move(s);
    v.safe_ = safe;
    return v;
  }
  static Value list(ValueList items = {});
  static Value tuple(ValueList items = {});
  static Value generator(ValueList items);
  static Value dict();
  static Value namespace_object();
  static Value callable(std::string name, std::function<Value(Interpreter&, Args&)> fn,
                        bool is_macro = false);
  static Value object(std::shared_ptr<ObjectData> obj);
  static Value undefined(std::string name);
  static Value undefined_attr(const Value& owner, std::string name);
  static Value undefined_item(const Value& owner, const Value& key);
  static Value undefined_hint(std::string hint);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_int() const { return kind_ == Kind::integer || kind_ == Kind::boolean; }
  bool is_number() const { return is_int() || kind_ == Kind::floating; }
  bool is_sequence() const { return kind_ == Kind::list || kind_ == Kind::tuple; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool safe() const { return safe_; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // integer or boolean
  double as_double() const { return kind_ == Kind::floating ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return s_; }
  ValueList& items() const { return *list_; }     // list, tuple or generator
  DictData& dict_data() const { return *dict_; }  // dict or namespace
  CallableData& callable_data() const { return *fn_; }
  ObjectData& object_data() const { return *obj_; }
  const UndefinedData* undefined_data() const { return undef_.get(); }
  const void* identity() const;  // for `is sameas`

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::undefined;
  bool safe_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<CallableData> fn_;
  std::shared_ptr<ObjectData> obj_;
  std::shared_ptr<UndefinedData> undef_;
};

// Python's str(), repr(), bool(), ==, < and type names.
std::string py_str(const Value& v);
std::string py_repr(const Value& v);
std::string py_type_name(const Value& v);
bool truthy(const Value& v);
bool py_eq(const Value& a, const Value& b);
bool py_lt(const Value& a, const Value& b);  // TypeError for unorderable types
std::string float_repr(double d);
// The message jinja2's Undefined raises with when it is used (attribute, call, arithmetic).
std::string undefined_message(const Value& v);
[[noreturn]] void fail_undefined(const Value& v);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent: nullptr = none.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

Value from_json(const nlohmann::ordered_json& j);

// UTF-8 <-> code points (invalid bytes map to U+FFFD); Python's character classes.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
bool py_isspace(char32_t c);
char32_t py_lower(char32_t c);
char32_t py_upper(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
bool py_isprintable(char32_t c);
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
std::string py_upper_str(std::string_view s);
std::string py_lower_str(std::string_view s);
// Python's str.splitlines() boundaries.
std::vector<std::string> py_splitlines(std::string_view s);
// markupsafe.escape
std::string html_escape(std::string_view s);

}  // namespace parley::jinja
