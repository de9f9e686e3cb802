// The tree walker: statements write into one output string, expressions evaluate to
// Values with CPython's operator semantics. Errors thrown below a node get that node's
// line attached on the way up.
#include "text/jinja/interpreter.h"

#include <cmath>

#include "text/jinja/builtins.h"
#include "text/jinja/py_strings.h"

namespace parley::jinja {
namespace {

// Runs f; a TemplateError without a line gets `line`.
template <class F>
auto with_line(int line, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (TemplateError& e) {
    if (e.line == 0) e.line = line;
    throw;
  }
}

class LoopObject : public ObjectData, public std::enable_shared_from_this<LoopObject> {
 public:
  explicit LoopObject(std::shared_ptr<ValueList> items) : items_(std::move(items)) {}
  size_t index0 = 0;

  Value get_attr(const std::string& name) override {
    int64_t n = static_cast<int64_t>(items_->size());
    int64_t i = static_cast<int64_t>(index0);
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(1);
    if (name == "depth0") return Value::integer(0);
    if (name == "previtem") {
      return i > 0 ? (*items_)[i - 1] : Value::undefined_hint("there is no previous item");
    }
    if (name == "nextitem") {
      return i + 1 < n ? (*items_)[i + 1] : Value::undefined_hint("there is no next item");
    }
    if (name == "cycle") {
      size_t idx = index0;
      return Value::callable("cycle", [idx](Interpreter&, Args& args) {
        if (args.positional.empty()) fail("no items for cycling given");
        return args.positional[idx % args.positional.size()];
      });
    }
    if (name == "changed") {
      auto self = shared_from_this();
      return Value::callable("changed", [self](Interpreter&, Args& args) {
        Value v = Value::tuple(args.positional);
        bool changed = !self->has_last_ || !py_eq(v, self->last_changed_);
        self->last_changed_ = v;
        self->has_last_ = true;
        return Value::boolean(changed);
      });
    }
    return Value::undefined_hint("'LoopContext' object has no attribute '" + name + "'");
  }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items_->size()) +
           ">";
  }

 private:
  std::shared_ptr<ValueList> items_;
  Value last_changed_;
  bool has_last_ = false;
};

[[noreturn]] void overflow() {
  fail_unsupported("integer overflow (parley's integers are 64-bit)");
}

int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + py_type_name(a) + "' and '" +
       py_type_name(b) + "'");
}

// Python slice.indices(len).
void slice_indices(int64_t len, const Value& start, const Value& stop, const Value& step,
                   int64_t& b, int64_t& e, int64_t& s) {
  auto as_index = [](const Value& v) {
    if (!v.is_int()) fail("slice indices must be integers or None");
    return v.as_int();
  };
  s = step.is_none() || step.is_undefined() ? 1 : as_index(step);
  if (s == 0) fail("slice step cannot be zero");
  auto adjust = [&](const Value& v, int64_t dflt) {
    if (v.is_none() || v.is_undefined()) return dflt;
    int64_t x = as_index(v);
    if (x < 0) {
      x += len;
      if (x < 0) x = s < 0 ? -1 : 0;
    } else if (x >= len) {
      x = s < 0 ? len - 1 : len;
    }
    return x;
  };
  b = adjust(start, s < 0 ? len - 1 : 0);
  e = adjust(stop, s < 0 ? -1 : len);
}

}  // namespace

Interpreter::Interpreter(const Program& program, Value globals, InterpreterLimits limits)
    : program_(program), limits_(limits) {
  scope_ = std::make_shared<Scope>();
  if (globals.is_dict()) {
    for (const auto& [k, v] : globals.dict_data().items) scope_->vars[k.str()] = v;
  }
}

std::string Interpreter::render(const Value& context) {
  auto ctx = std::make_shared<Scope>();
  ctx->parent = scope_;
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict_data().items) {
      if (k.is_string()) ctx->vars[k.str()] = v;
    }
  }
  auto top = std::make_shared<Scope>();
  top->parent = ctx;
  scope_ = top;
  std::string out;
  exec(program_.body, out);
  return out;
}

void Interpreter::check_output(const std::string& out) const {
  if (out.size() > limits_.max_output_bytes) {
    fail("the rendered template exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  for (const Stmt& s : body) {
    Flow f = with_line(s.line, [&] { return exec_stmt(s, out); });
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  switch (s.kind) {
    case StmtKind::text:
      out += s.text;
      check_output(out);
      break;
    case StmtKind::print:
      out += py_str(eval(*s.expr));
      check_output(out);
      break;
    case StmtKind::if_:
      for (const auto& [test, body] : s.branches) {
        if (truthy(eval(*test))) return exec(body, out);
      }
      return exec(s.else_body, out);
    case StmtKind::for_: exec_for(s, out); break;
    case StmtKind::set: assign(*s.target, eval(*s.expr)); break;
    case StmtKind::set_block: {
      std::string body;
      exec(s.body, body);
      Value v = Value::string(std::move(body));
      if (s.expr) {
        block_input_ = v;
        v = eval(*s.expr);
      }
      assign(*s.target, v);
      break;
    }
    case StmtKind::macro: scope_->vars[s.macro->name] = make_macro(s.macro); break;
    case StmtKind::filter_block: {
      std::string body;
      exec(s.body, body);
      block_input_ = Value::string(std::move(body));
      out += py_str(eval(*s.expr));
      break;
    }
    case StmtKind::break_: return Flow::break_;
    case StmtKind::continue_: return Flow::continue_;
    case StmtKind::scope: {
      auto saved = scope_;
      scope_ = std::make_shared<Scope>();
      scope_->parent = saved;
      try {
        exec(s.body, out);
      } catch (...) {
        scope_ = saved;
        throw;
      }
      scope_ = saved;
      break;
    }
    case StmtKind::call_block: fail_unsupported("call blocks are not supported");
  }
  return Flow::normal;
}

ValueList Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return {};
    case Kind::list:
    case Kind::tuple: return v.items();
    case Kind::generator: return std::move(v.items());  // consumed, as in Python
    case Kind::dict: {
      ValueList keys;
      for (const auto& [k, val] : v.dict_data().items) keys.push_back(k);
      return keys;
    }
    case Kind::string: {
      ValueList chars;
      for (char32_t c : utf8_decode(v.str())) {
        std::string s;
        utf8_append(s, c);
        chars.push_back(Value::string(std::move(s), v.safe()));
      }
      return chars;
    }
    default: fail("'" + py_type_name(v) + "' object is not iterable");
  }
}

void Interpreter::exec_for(const Stmt& s, std::string& out) {
  ValueList all = iterate(eval(*s.expr));
  auto saved = scope_;
  auto restore = [&] { scope_ = saved; };
  try {
    auto items = std::make_shared<ValueList>();
    if (s.cond) {
      for (const Value& v : all) {
        scope_ = std::make_shared<Scope>();
        scope_->parent = saved;
        assign(*s.target, v);
        bool keep = truthy(eval(*s.cond));
        if (keep) items->push_back(v);
      }
    } else {
      *items = std::move(all);
    }
    auto loop = std::make_shared<LoopObject>(items);
    Value loop_value = Value::object(loop);
    for (size_t i = 0; i < items->size(); ++i) {
      if (++iterations_ > limits_.max_loop_iterations) {
        fail("the template ran more than " + std::to_string(limits_.max_loop_iterations) +
             " loop iterations");
      }
      scope_ = std::make_shared<Scope>();
      scope_->parent = saved;
      loop->index0 = i;
      scope_->vars["loop"] = loop_value;
      assign(*s.target, (*items)[i]);
      if (exec(s.body, out) == Flow::break_) break;
    }
    if (items->empty() && !s.else_body.empty()) {
      scope_ = std::make_shared<Scope>();
      scope_->parent = saved;
      exec(s.else_body, out);
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void Interpreter::assign(const Expr& target, const Value& value) {
  if (target.kind == ExprKind::name) {
    scope_->vars[target.name] = value;
    return;
  }
  if (target.kind == ExprKind::tuple) {
    ValueList items = iterate(value);
    if (items.size() != target.args.size()) {
      fail(items.size() > target.args.size()
               ? "too many values to unpack (expected " + std::to_string(target.args.size()) + ")"
               : "not enough values to unpack (expected " + std::to_string(target.args.size()) +
                     ", got " + std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i]);
    return;
  }
  if (target.kind == ExprKind::nsref) {
    Value ns;
    for (Scope* sc = scope_.get(); sc; sc = sc->parent.get()) {
      auto it = sc->vars.find(target.name);
      if (it != sc->vars.end()) {
        ns = it->second;
        break;
      }
    }
    if (ns.kind() != Kind::namespace_) fail("cannot assign attribute on non-namespace object");
    const std::string& attr = target.value.str();
    if (!attr.empty() && attr[0] == '_') {
      fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
           attr + "'. Please rename the attribute.");
    }
    ns.dict_data().set(Value::string(attr), value);
    return;
  }
  fail("can't assign to this expression");
}

Value Interpreter::make_macro(const std::shared_ptr<MacroDef>& macro) {
  // Weak: the defining scope holds this macro, and a strong pointer back would be a cycle
  // that leaks every render.
  std::weak_ptr<Scope> defining = scope_;
  return Value::callable(
      macro->name,
      [macro, defining](Interpreter& in, Args& args) {
        const MacroDef& m = *macro;
        std::shared_ptr<Scope> parent = defining.lock();
        if (!parent) fail("macro '" + m.name + "' called after its scope ended");
        if (in.call_depth_ >= in.limits_.max_call_depth) {
          fail("maximum recursion depth exceeded (macro '" + m.name + "')");
        }
        auto scope = std::make_shared<Scope>();
        scope->parent = parent;
        ValueList varargs;
        std::vector<bool> bound(m.params.size(), false);
        for (size_t i = 0; i < args.positional.size(); ++i) {
          if (i < m.params.size()) {
            scope->vars[m.params[i]] = args.positional[i];
            bound[i] = true;
          } else if (m.uses_varargs) {
            varargs.push_back(args.positional[i]);
          } else {
            fail("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) +
                 " argument(s)");
          }
        }
        Value kwargs = Value::dict();
        Value caller;
        for (auto& [k, v] : args.keyword) {
          size_t i = 0;
          while (i < m.params.size() && m.params[i] != k) ++i;
          if (i < m.params.size()) {
            if (bound[i])
              fail("macro '" + m.name + "' got multiple values for argument '" + k + "'");
            scope->vars[k] = v;
            bound[i] = true;
          } else if (k == "caller" && m.uses_caller) {
            caller = v;
          } else if (m.uses_kwargs) {
            kwargs.dict_data().set(Value::string(k), v);
          } else {
            fail("macro '" + m.name + "' takes no keyword argument '" + k + "'");
          }
        }
        auto saved = in.scope_;
        in.scope_ = scope;
        ++in.call_depth_;
        std::string out;
        try {
          size_t first_default = m.params.size() - m.defaults.size();
          for (size_t i = 0; i < m.params.size(); ++i) {
            if (bound[i]) continue;
            scope->vars[m.params[i]] = i >= first_default ? in.eval(*m.defaults[i - first_default])
                                                          : Value::undefined(m.params[i]);
          }
          if (m.uses_varargs) scope->vars["varargs"] = Value::tuple(varargs);
          if (m.uses_kwargs) scope->vars["kwargs"] = kwargs;
          if (m.uses_caller) scope->vars["caller"] = caller;
          in.exec(m.body, out);
        } catch (...) {
          in.scope_ = saved;
          --in.call_depth_;
          throw;
        }
        in.scope_ = saved;
        --in.call_depth_;
        return Value::string(std::move(out));
      },
      true);
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::undefined: fail_undefined(obj);
    case Kind::namespace_: {
      long i = obj.dict_data().find(name);
      if (i >= 0) return obj.dict_data().items[i].second;
      return Value::undefined_attr(obj, name);
    }
    case Kind::object: return obj.object_data().get_attr(name);
    default: break;
  }
  if (auto attr = python_attribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    long i = obj.dict_data().find(name);
    if (i >= 0) return obj.dict_data().items[i].second;
  }
  return Value::undefined_attr(obj, name);
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::undefined: fail_undefined(obj);
    case Kind::dict: {
      long i = obj.dict_data().find(key);
      if (i >= 0) return obj.dict_data().items[i].second;
      break;
    }
    case Kind::list:
    case Kind::tuple:
      if (key.is_int()) {
        int64_t n = static_cast<int64_t>(obj.items().size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.items()[i];
        return Value::undefined_item(obj, key);
      }
      break;
    case Kind::string:
      if (key.is_int()) {
        std::u32string u = utf8_decode(obj.str());
        int64_t n = static_cast<int64_t>(u.size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
          std::string c;
          utf8_append(c, u[i]);
          return Value::string(std::move(c), obj.safe());
        }
        return Value::undefined_item(obj, key);
      }
      break;
    case Kind::namespace_:
    case Kind::object:
      if (key.is_string()) return getattr(obj, key.str());
      break;
    default: break;
  }
  if (key.is_string()) {
    if (auto attr = python_attribute(obj, key.str())) return *attr;
  }
  return Value::undefined_item(obj, key);
}

Value Interpreter::eval_slice(const Value& obj, const Expr& sl) {
  if (obj.is_undefined()) fail_undefined(obj);
  Value parts[3];
  for (int i = 0; i < 3; ++i) parts[i] = sl.args[i] ? eval(*sl.args[i]) : Value::none();
  auto pick = [&](int64_t len, auto&& at) {
    int64_t b, e, st;
    slice_indices(len, parts[0], parts[1], parts[2], b, e, st);
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) at(i);
  };
  if (obj.is_sequence()) {
    ValueList out;
    const ValueList& items = obj.items();
    pick(static_cast<int64_t>(items.size()), [&](int64_t i) { out.push_back(items[i]); });
    return obj.kind() == Kind::tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if (obj.is_string()) {
    std::u32string u = utf8_decode(obj.str());
    std::u32string out;
    pick(static_cast<int64_t>(u.size()), [&](int64_t i) { out.push_back(u[i]); });
    return Value::string(utf8_encode(out), obj.safe());
  }
  return Value::undefined_hint("'" + py_type_name(obj) + "' object is not subscriptable");
}

Value Interpreter::call(const Value& callee, Args& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.kind() != Kind::callable)
    fail("'" + py_type_name(callee) + "' object is not callable");
  return callee.callable_data().fn(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, Args& args) {
  FilterFn f = find_filter(name);
  if (!f) fail("No filter named '" + name + "' found.");
  return f(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, Args& args) {
  TestFn t = find_test(name);
  if (!t) fail("No test named '" + name + "' found.");
  return t(*this, input, args);
}

Value Interpreter::eval_filter(const Expr& e) {
  if (!e.filter) fail_unsupported("no filter named '" + e.name + "'");
  Value input = e.args[0] ? eval(*e.args[0]) : block_input_;
  Args args;
  for (size_t i = 1; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
  return e.filter(*this, input, args);
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool ints = a.is_int() && b.is_int();
  bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::integer(add(a.as_int(), b.as_int()));
    if (nums) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      // markupsafe: Markup + str escapes the str and stays Markup.
      if (a.safe() && !b.safe()) return Value::string(a.str() + html_escape(b.str()), true);
      if (b.safe() && !a.safe()) return Value::string(html_escape(a.str()) + b.str(), true);
      return Value::string(a.str() + b.str(), a.safe());
    }
    if (a.kind() == b.kind() && a.is_sequence()) {
      ValueList items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.kind() == Kind::list ? Value::list(std::move(items))
                                    : Value::tuple(std::move(items));
    }
    if (a.is_string()) fail("can only concatenate str (not \"" + py_type_name(b) + "\") to str");
    if (a.kind() == Kind::list) {
      fail("can only concatenate list (not \"" + py_type_name(b) + "\") to list");
    }
    bad_operands("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(sub(a.as_int(), b.as_int()));
    if (nums) return Value::floating(a.as_double() - b.as_double());
    bad_operands("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(mul(a.as_int(), b.as_int()));
    if (nums) return Value::floating(a.as_double() * b.as_double());
    const Value* seq = a.is_int() ? &b : &a;
    const Value* count = a.is_int() ? &a : &b;
    if (count->is_int() && (seq->is_string() || seq->is_sequence())) {
      int64_t n = std::max<int64_t>(0, count->as_int());
      size_t unit = seq->is_string() ? seq->str().size() : seq->items().size();
      if (unit * static_cast<size_t>(n) > limits_.max_output_bytes) fail("repetition too large");
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return Value::string(std::move(out), seq->safe());
      }
      ValueList out;
      for (int64_t i = 0; i < n; ++i)
        out.insert(out.end(), seq->items().begin(), seq->items().end());
      return seq->kind() == Kind::list ? Value::list(std::move(out)) : Value::tuple(std::move(out));
    }
    bad_operands("*", a, b);
  }
  if (op == "/") {
    if (!nums) bad_operands("/", a, b);
    if (b.as_double() == 0) fail("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) bad_operands("//", a, b);
    if (ints) {
      if (b.as_int() == 0) fail("integer division or modulo by zero");
      return Value::integer(floordiv(a.as_int(), b.as_int()));
    }
    if (b.as_double() == 0) fail("float floor division by zero");
    return Value::floating(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value::string(percent_format(a.str(), b));
    if (!nums) bad_operands("%", a, b);
    if (ints) {
      if (b.as_int() == 0) fail("integer division or modulo by zero");
      int64_t m = a.as_int() % b.as_int();
      if (m != 0 && ((m < 0) != (b.as_int() < 0))) m += b.as_int();
      return Value::integer(m);
    }
    if (b.as_double() == 0) fail("float modulo");
    double m = std::fmod(a.as_double(), b.as_double());
    if (m != 0 && ((m < 0) != (b.as_double() < 0))) m += b.as_double();
    return Value::floating(m);
  }
  if (op == "**") {
    if (!nums) bad_operands("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) {
        result = mul(result, base);
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  fail_unsupported("operator " + op);
}

bool Interpreter::compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return py_eq(a, b);
  if (op == "!=") return !py_eq(a, b);
  if (op == "in" || op == "notin") {
    bool found = false;
    switch (b.kind()) {
      case Kind::string:
        if (!a.is_string()) {
          fail("'in <string>' requires string as left operand, not " + py_type_name(a));
        }
        found = b.str().find(a.str()) != std::string::npos;
        break;
      case Kind::list:
      case Kind::tuple:
        for (const Value& v : b.items()) {
          if (py_eq(v, a)) {
            found = true;
            break;
          }
        }
        break;
      case Kind::dict: found = b.dict_data().find(a) >= 0; break;
      case Kind::undefined: found = false; break;
      case Kind::generator:
        for (const Value& v : iterate(b)) {
          if (py_eq(v, a)) {
            found = true;
            break;
          }
        }
        break;
      default: fail("argument of type '" + py_type_name(b) + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "<") return py_lt(a, b);
  if (op == ">") return py_lt(b, a);
  if (op == "<=") return py_lt(a, b) || py_eq(a, b);
  if (op == ">=") return py_lt(b, a) || py_eq(a, b);
  fail_unsupported("comparison " + op);
}

Value Interpreter::eval(const Expr& e) {
  return with_line(e.line, [&]() -> Value {
    switch (e.kind) {
      case ExprKind::constant: return e.value;
      case ExprKind::name:
        for (Scope* s = scope_.get(); s; s = s->parent.get()) {
          auto it = s->vars.find(e.name);
          if (it != s->vars.end()) return it->second;
        }
        return Value::undefined(e.name);
      case ExprKind::getattr: return getattr(eval(*e.args[0]), e.name);
      case ExprKind::getitem: {
        Value obj = eval(*e.args[0]);
        if (e.args[1]->kind == ExprKind::slice) return eval_slice(obj, *e.args[1]);
        return getitem(obj, eval(*e.args[1]));
      }
      case ExprKind::slice: fail("a slice outside of a subscript");
      case ExprKind::call: {
        Value callee = eval(*e.args[0]);
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
        for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
        return call(callee, args);
      }
      case ExprKind::filter: return eval_filter(e);
      case ExprKind::test: {
        if (!e.test) fail_unsupported("no test named '" + e.name + "'");
        Value input = eval(*e.args[0]);
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
        for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
        return Value::boolean(e.test(*this, input, args));
      }
      case ExprKind::neg:
      case ExprKind::pos: {
        Value v = eval(*e.args[0]);
        if (v.is_undefined()) fail_undefined(v);
        if (!v.is_number()) {
          fail(std::string("bad operand type for unary ") + (e.kind == ExprKind::neg ? "-" : "+") +
               ": '" + py_type_name(v) + "'");
        }
        if (e.kind == ExprKind::pos) return v.is_int() ? Value::integer(v.as_int()) : v;
        if (v.is_int()) return Value::integer(sub(0, v.as_int()));
        return Value::floating(-v.as_double());
      }
      case ExprKind::not_: return Value::boolean(!truthy(eval(*e.args[0])));
      case ExprKind::binary: return binary(e.name, eval(*e.args[0]), eval(*e.args[1]));
      case ExprKind::and_: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case ExprKind::or_: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case ExprKind::compare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1]);
          if (!compare(e.ops[i], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case ExprKind::concat: {
        std::string out;
        for (const auto& a : e.args) out += py_str(eval(*a));
        return Value::string(std::move(out));
      }
      case ExprKind::cond:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined_hint("the inline if-expression on line " + std::to_string(e.line) +
                                     " evaluated to false and no else section was defined.");
      case ExprKind::list:
      case ExprKind::tuple: {
        ValueList items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return e.kind == ExprKind::list ? Value::list(std::move(items))
                                        : Value::tuple(std::move(items));
      }
      case ExprKind::dict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (k.kind() == Kind::list || k.kind() == Kind::dict || k.is_undefined()) {
            fail("unhashable type: '" + py_type_name(k) + "'");
          }
          d.dict_data().set(k, eval(*e.args[i + 1]));
        }
        return d;
      }
      case ExprKind::nsref: fail("a namespace reference outside of an assignment");
    }
    fail("unknown expression");
  });
}

}  // namespace parley::jinja
