// The parsed form of a template: expression and statement nodes as jinja2's parser builds
// them (jinja2/nodes.py), with filters and tests already resolved to parley's builtins so
// that an unknown one fails when the template is loaded, not when a request reaches it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace parley::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

using FilterFn = Value (*)(Interpreter&, const Value& input, Args& args);
using TestFn = bool (*)(Interpreter&, const Value& input, Args& args);

enum class ExprKind {
  constant,  // value
  name,      // name
  getattr,   // args[0].name
  getitem,   // args[0][args[1]]
  slice,     // args: start, stop, step (null when absent)
  call,      // args[0](args[1:], kwargs)
  filter,    // args[0] | name(args[1:], kwargs); args[0] null inside {% filter %} / set blocks
  test,      // args[0] is name(args[1:], kwargs)
  neg,       // -args[0]
  pos,       // +args[0]
  not_,      // not args[0]
  binary,    // args[0] op args[1]: + - * / // % **
  and_,      // args[0] and args[1]
  or_,       // args[0] or args[1]
  compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  concat,    // args joined with ~
  cond,      // args[1] if args[0] else args[2] (args[2] null: undefined)
  list,      // [args]
  tuple,     // (args)
  dict,      // {args[0]: args[1], args[2]: args[3], ...}
  nsref,     // name.attr as an assignment target (namespace attribute)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  std::string name;  // name, attribute, operator, filter or test name
  Value value;       // constant
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // compare
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

struct Stmt;
using Body = std::vector<Stmt>;

enum class StmtKind {
  text,          // text
  print,         // {{ expr }}
  if_,           // branches (test, body) in order; else_body
  for_,          // for target in expr [if cond]: body; else_body
  set,           // set target = expr
  set_block,     // set target [| filters]: body (filters in expr, input null)
  macro,         // macro name(params = defaults): body
  call_block,    // call(params) expr: body
  filter_block,  // filter expr: body
  break_,
  continue_,
  scope,  // body in place (generation blocks)
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned to the last params
  Body body;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, target, cond;
  Body body, else_body;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::shared_ptr<MacroDef> macro;
};

struct Program {
  std::string name;
  Body body;
};

}  // namespace parley::jinja
