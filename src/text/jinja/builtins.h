// The builtins a template reaches by name: jinja2's filters and tests (with transformers'
// tojson), Python's str / dict / list methods as the immutable sandbox exposes them, and
// the globals transformers installs (raise_exception, strftime_now, namespace, dict,
// range).
#pragma once

#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "text/jinja/ast.h"

namespace parley::jinja {

FilterFn find_filter(const std::string& name);  // nullptr when unknown
TestFn find_test(const std::string& name);      // nullptr when unknown

// Python's getattr(obj, name) for builtin types under ImmutableSandboxedEnvironment:
// a bound method, a sandbox refusal (an Undefined that raises SecurityError's message when
// used), or nullopt when Python has no such attribute.
std::optional<Value> python_attribute(const Value& obj, const std::string& name);

// Binds call arguments to parameter names as Python would (positional, then keywords,
// then defaults). Throws TypeError-like errors naming `fn`.
struct Param {
  const char* name;
  std::optional<Value> default_value;  // nullopt: required
};
std::vector<Value> bind_args(const std::string& fn, Args& args, const std::vector<Param>& params);

struct Globals {
  std::function<std::tm()> now;  // strftime_now's clock
};
Value make_globals(const Globals& globals);  // a dict of name -> value

}  // namespace parley::jinja
