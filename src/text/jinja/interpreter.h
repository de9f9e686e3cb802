// Walks a parsed template over a context, with jinja2's runtime semantics: a fresh scope
// per loop iteration and per macro call (so `set` inside a loop does not leak, which is
// why templates use namespace()), Undefined values that print as nothing but fail when
// used, and the sandbox's attribute rules (attribute first, then item, for `a.b`; item
// first for `a[b]`).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "text/jinja/ast.h"

namespace parley::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

struct InterpreterLimits {
  int max_call_depth = 200;                  // nested macro calls (jinja2 stops at Python's limit)
  size_t max_output_bytes = 64u << 20;       // a runaway loop fails instead of eating memory
  int64_t max_loop_iterations = 10'000'000;  // over all loops of one render
};

class Interpreter {
 public:
  Interpreter(const Program& program, Value globals, InterpreterLimits limits = {});

  // context: a dict; its keys become template variables over the globals.
  std::string render(const Value& context);

  Value eval(const Expr& e);
  Value call(const Value& callee, Args& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // Filters and tests by name, for map/select/selectattr and friends.
  Value apply_filter(const std::string& name, const Value& input, Args& args);
  bool apply_test(const std::string& name, const Value& input, Args& args);
  // Python iteration: list/tuple items, dict keys, str characters, Undefined -> empty.
  ValueList iterate(const Value& v);

 private:
  enum class Flow { normal, break_, continue_ };
  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void assign(const Expr& target, const Value& value);
  Value make_macro(const std::shared_ptr<MacroDef>& macro);
  Value binary(const std::string& op, const Value& a, const Value& b);
  bool compare(const std::string& op, const Value& a, const Value& b);
  Value eval_filter(const Expr& e);
  Value eval_slice(const Value& obj, const Expr& slice);
  void check_output(const std::string& out) const;

  const Program& program_;
  InterpreterLimits limits_;
  std::shared_ptr<Scope> scope_;
  Value block_input_;  // the rendered body a {% filter %} / {% set %} block filters
  int call_depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace parley::jinja
