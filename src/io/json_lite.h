// json_lite: a small strict JSON (RFC 8259) parser and string quoting for headers inside
// model files (safetensors). Not a general JSON library: the app layer uses nlohmann/json,
// which parley_io does not link. Input is untrusted: nesting depth is limited, strings
// must be valid UTF-8, duplicate object keys are rejected, numbers keep their exact text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace parley::io::json {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // in file order, keys unique

// The text of a number as written ("-1.5e3"); converted on request so that 64-bit
// integers (safetensors offsets) stay exact.
struct Number {
  std::string text;
};

class Value {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Value() = default;  // null
  explicit Value(bool b) : v_(b) {}
  explicit Value(Number n) : v_(std::move(n)) {}
  explicit Value(std::string s) : v_(std::move(s)) {}
  explicit Value(Array a) : v_(std::move(a)) {}
  explicit Value(Object o) : v_(std::move(o)) {}

  Kind kind() const { return Kind(v_.index()); }
  bool is(Kind k) const { return kind() == k; }
  // Each accessor throws Error(invalid_argument) if the value is of another kind.
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  // The number as an exact integer; nullopt when it has a fraction or exponent or does not
  // fit. as_uint64 also returns nullopt for negative numbers.
  std::optional<uint64_t> as_uint64() const;
  std::optional<int64_t> as_int64() const;
  double as_double() const;
  // The member `key` of an object, or null when absent (or when this is not an object).
  const Value* find(std::string_view key) const;

 private:
  std::variant<std::monostate, bool, Number, std::string, Array, Object> v_;
};

std::string_view kind_name(Value::Kind k);  // "null", "boolean", ...

// Parses one JSON value; only whitespace may follow it. Errors throw
// Error(invalid_argument, source + ": invalid JSON: <problem> at byte N"), `source` naming
// the format and file ("[safetensors] model.safetensors").
constexpr int kDefaultMaxDepth = 64;
Value parse(std::string_view text, const std::string& source, int max_depth = kDefaultMaxDepth);

// `s` as a JSON string literal with quotes; escapes '"', '\\' and control characters,
// passes other UTF-8 through.
std::string quote(std::string_view s);

// The UTF-8 bytes of code point cp appended to out (the \u escapes' writer; the regex
// parser's literals).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace parley::io::json
