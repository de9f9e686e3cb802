// Recursive descent over the token stream, one function per jinja2 grammar rule, in
// jinja2's precedence order: condexpr < or < and < not < compare < + - < ~ < * / // % <
// ** < unary (with postfix, filters and tests).
#include "text/jinja/parser.h"

#include <initializer_list>

#include "text/jinja/builtins.h"
#include "text/jinja/lexer.h"

namespace parley::jinja {
namespace {

constexpr int kMaxNesting = 200;  // deeper expressions or blocks are refused, not recursed

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_all() {
    Body body = subparse({});
    if (cur().type != Tok::eof) error("unexpected " + describe(cur()));
    check_names(body, false);
    return body;
  }

  // jinja2 fails on an unknown filter or test at compile time, except inside an if
  // statement or an inline if (its "soft" frames, reset by loops, macros and blocks):
  // there the error waits until the filter runs. Templates rely on that, e.g. DeepSeek's
  // `from_json` behind a type check.
  void check_names(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == ExprKind::cond) soft = true;
    if (!soft && e->kind == ExprKind::filter && !e->filter) {
      unsupported("no filter named '" + e->name + "'", e->line);
    }
    if (!soft && e->kind == ExprKind::test && !e->test) {
      unsupported("no test named '" + e->name + "'", e->line);
    }
    for (const auto& a : e->args) check_names(a.get(), soft);
    for (const auto& [k, v] : e->kwargs) check_names(v.get(), soft);
  }
  void check_names(const Body& body, bool soft) {
    for (const Stmt& s : body) {
      switch (s.kind) {
        case StmtKind::if_:
          for (const auto& [test, b] : s.branches) {
            check_names(test.get(), true);
            check_names(b, true);
          }
          check_names(s.else_body, true);
          break;
        case StmtKind::for_:
          check_names(s.expr.get(), soft);
          check_names(s.cond.get(), false);
          check_names(s.body, false);
          check_names(s.else_body, false);
          break;
        case StmtKind::print:
        case StmtKind::set: check_names(s.expr.get(), soft); break;
        case StmtKind::macro:
          for (const auto& d : s.macro->defaults) check_names(d.get(), false);
          check_names(s.macro->body, false);
          break;
        default: check_names(s.expr.get(), false); check_names(s.body, false);
      }
    }
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return t_[p_]; }
  const Token& look() const { return t_[p_ + 1 < t_.size() ? p_ + 1 : p_]; }
  const Token& next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool is_name(const char* n) const { return cur().type == Tok::name && cur().text == n; }
  bool is_op(const char* o) const { return cur().type == Tok::op && cur().text == o; }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  bool skip_op(const char* o) {
    if (!is_op(o)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const std::string& message, int line = 0) {
    throw TemplateError{message, line ? line : cur().line, false};
  }
  [[noreturn]] void unsupported(const std::string& message, int line = 0) {
    throw TemplateError{message, line ? line : cur().line, true};
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::data: return "template data";
      case Tok::variable_begin: return "'begin of print statement'";
      case Tok::variable_end: return "'end of print statement'";
      case Tok::block_begin: return "'begin of statement block'";
      case Tok::block_end: return "'end of statement block'";
      case Tok::eof: return "end of template";
      case Tok::string: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* o) {
    if (!skip_op(o)) error("expected '" + std::string(o) + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::name) error("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) error(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }

  struct Depth {
    Parser& p;
    explicit Depth(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error("template nesting is too deep");
    }
    ~Depth() { --p.depth_; }
  };

  static Stmt make_stmt(StmtKind kind, int line) {
    Stmt s;
    s.kind = kind;
    s.line = line;
    return s;
  }

  static ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----
  Body subparse(std::initializer_list<const char*> end_tokens) {
    Depth d(*this);
    Body body;
    while (cur().type != Tok::eof) {
      const Token& t = cur();
      if (t.type == Tok::data) {
        Stmt s = make_stmt(StmtKind::text, t.line);
        s.text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::variable_begin) {
        int line = next().line;
        Stmt s = make_stmt(StmtKind::print, line);
        s.expr = parse_tuple(true, {});
        expect(Tok::variable_end, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::block_begin) {
        next();
        for (const char* e : end_tokens) {
          if (is_name(e)) return body;
        }
        parse_statement(body);
        expect(Tok::block_end, "end of statement block");
      } else {
        error("unexpected " + describe(t));
      }
    }
    if (end_tokens.size() != 0) {
      std::string want;
      for (const char* e : end_tokens)
        want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
      error("unexpected end of template; looking for the tags " + want);
    }
    return body;
  }

  // parse_statements: optional colon, block end, body up to one of end_tokens.
  Body parse_statements(std::initializer_list<const char*> end_tokens, bool drop_needle) {
    skip_op(":");
    expect(Tok::block_end, "end of statement block");
    Body body = subparse(end_tokens);
    if (cur().type == Tok::eof) error("unexpected end of template");
    if (drop_needle) next();
    return body;
  }

  void parse_statement(Body& out) {
    if (cur().type != Tok::name) error("tag name expected");
    std::string tag = cur().text;
    int line = cur().line;
    if (tag == "if") return out.push_back(parse_if());
    if (tag == "for") return out.push_back(parse_for());
    if (tag == "set") return out.push_back(parse_set());
    if (tag == "macro") return out.push_back(parse_macro());
    if (tag == "filter") return out.push_back(parse_filter_block());
    if (tag == "break" || tag == "continue") {
      next();
      if (loop_depth_ == 0) error("'" + tag + "' outside of a loop", line);
      out.push_back(make_stmt(tag == "break" ? StmtKind::break_ : StmtKind::continue_, line));
      return;
    }
    if (tag == "generation") {
      // transformers' AssistantTracker: the body renders in place.
      next();
      Stmt s = make_stmt(StmtKind::scope, line);
      s.body = parse_statements({"endgeneration"}, true);
      out.push_back(std::move(s));
      return;
    }
    static const char* const kKnown[] = {"block",  "extends", "print", "include",
                                         "import", "from",    "with",  "autoescape",
                                         "call",   "do",      "trans", "pluralize"};
    for (const char* k : kKnown) {
      if (tag == k) unsupported("the '" + tag + "' statement is not supported", line);
    }
    unsupported("unknown statement '" + tag + "'", line);
  }

  Stmt parse_if() {
    Stmt s = make_stmt(StmtKind::if_, next().line);
    while (true) {
      ExprPtr test = parse_tuple(false, {});
      Body body = parse_statements({"elif", "else", "endif"}, false);
      s.branches.emplace_back(std::move(test), std::move(body));
      std::string tok = next().text;
      if (tok == "elif") continue;
      if (tok == "else") s.else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  Stmt parse_for() {
    Stmt s = make_stmt(StmtKind::for_, next().line);
    s.target = parse_assign_target(false, "in");
    if (!skip_name("in")) error("expected 'in', got " + describe(cur()));
    s.expr = parse_tuple(false, "recursive");
    if (skip_name("if")) s.cond = parse_expression(true);
    if (is_name("recursive")) unsupported("recursive for loops are not supported");
    ++loop_depth_;
    s.body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") s.else_body = parse_statements({"endfor"}, true);
    return s;
  }

  Stmt parse_set() {
    int line = next().line;
    ExprPtr target = parse_assign_target(true, nullptr);
    if (skip_op("=")) {
      Stmt s = make_stmt(StmtKind::set, line);
      s.target = std::move(target);
      s.expr = parse_tuple(true, {});
      return s;
    }
    Stmt s = make_stmt(StmtKind::set_block, line);
    s.target = std::move(target);
    if (is_op("|")) s.expr = parse_filter(nullptr, false);
    int saved = loop_depth_;
    s.body = parse_statements({"endset"}, true);
    loop_depth_ = saved;
    return s;
  }

  Stmt parse_macro() {
    Stmt s = make_stmt(StmtKind::macro, next().line);
    auto m = std::make_shared<MacroDef>();
    m->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!m->params.empty()) expect_op(",");
      if (is_op(")")) break;  // jinja2 accepts a trailing comma
      m->params.push_back(expect_name());
      if (skip_op("=")) {
        m->defaults.push_back(parse_expression(true));
      } else if (!m->defaults.empty()) {
        error("non-default argument follows default argument");
      }
    }
    expect_op(")");
    int saved = loop_depth_;
    loop_depth_ = 0;  // break/continue do not cross a macro boundary
    m->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved;
    scan_macro_names(m->body, *m);
    s.macro = std::move(m);
    return s;
  }

  Stmt parse_filter_block() {
    Stmt s = make_stmt(StmtKind::filter_block, next().line);
    s.expr = parse_filter(nullptr, true);
    s.body = parse_statements({"endfilter"}, true);
    return s;
  }

  static void scan_expr_names(const Expr* e, MacroDef& m) {
    if (!e) return;
    if (e->kind == ExprKind::name) {
      if (e->name == "caller") m.uses_caller = true;
      if (e->name == "varargs") m.uses_varargs = true;
      if (e->name == "kwargs") m.uses_kwargs = true;
    }
    for (const auto& a : e->args) scan_expr_names(a.get(), m);
    for (const auto& [k, v] : e->kwargs) scan_expr_names(v.get(), m);
  }
  static void scan_macro_names(const Body& body, MacroDef& m) {
    for (const Stmt& s : body) {
      scan_expr_names(s.expr.get(), m);
      scan_expr_names(s.cond.get(), m);
      for (const auto& [t, b] : s.branches) {
        scan_expr_names(t.get(), m);
        scan_macro_names(b, m);
      }
      scan_macro_names(s.body, m);
      scan_macro_names(s.else_body, m);
    }
  }

  // for targets (extra_end "in") and set targets (namespace refs allowed).
  ExprPtr parse_assign_target(bool with_namespace, const char* extra_end) {
    int line = cur().line;
    if (with_namespace && cur().type == Tok::name && look().type == Tok::op && look().text == ".") {
      auto e = node(ExprKind::nsref, line);
      e->name = next().text;
      next();
      e->value = Value::string(expect_name());
      return e;
    }
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      if (cur().type != Tok::name) error("can't assign to " + describe(cur()));
      const std::string& n = cur().text;
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
        error("can't assign to a constant");
      auto e = node(ExprKind::name, cur().line);
      e->name = next().text;
      items.push_back(std::move(e));
      if (!is_op(",")) break;
      is_tuple = true;
    }
    if (items.empty()) error("expected an assignment target, got " + describe(cur()));
    if (!is_tuple) return std::move(items[0]);
    auto t = node(ExprKind::tuple, line);
    t->args = std::move(items);
    return t;
  }

  // ---- expressions ----
  bool is_tuple_end(const char* extra_end) const {
    Tok ty = cur().type;
    if (ty == Tok::variable_end || ty == Tok::block_end || ty == Tok::eof) return true;
    if (ty == Tok::op && cur().text == ")") return true;
    return extra_end && ty == Tok::name && cur().text == extra_end;
  }

  ExprPtr parse_tuple(bool with_condexpr, const char* extra_end, bool explicit_parens = false) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) error("expected an expression, got " + describe(cur()));
    }
    auto t = node(ExprKind::tuple, line);
    t->args = std::move(items);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Depth d(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      auto c = node(ExprKind::cond, line);
      ExprPtr expr2 = parse_or();
      ExprPtr expr3 = skip_name("else") ? parse_condexpr() : nullptr;
      c->args.push_back(std::move(expr2));
      c->args.push_back(std::move(expr1));
      c->args.push_back(std::move(expr3));
      expr1 = std::move(c);
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, ExprPtr l, ExprPtr r, int line, std::string op = "") {
    auto e = node(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) {
      left = binary(ExprKind::or_, std::move(left), parse_and(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_and() {
    int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) {
      left = binary(ExprKind::and_, std::move(left), parse_not(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Depth d(*this);
      auto e = node(ExprKind::not_, next().line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Tok::op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && look().type == Tok::name && look().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprKind::compare, line);
        cmp->args.push_back(std::move(expr));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(expr);
  }

  ExprPtr parse_math1() {
    int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(ExprKind::binary, std::move(left), parse_concat(), line, op);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = node(ExprKind::concat, line);
    c->args.push_back(std::move(first));
    while (skip_op("~")) c->args.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
    int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(ExprKind::binary, std::move(left), parse_pow(), line, op);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) {
      left = binary(ExprKind::binary, std::move(left), parse_unary(true), line, "**");
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Depth d(*this);
    int line = cur().line;
    ExprPtr n;
    if (is_op("-") || is_op("+")) {
      bool neg = next().text == "-";
      n = node(neg ? ExprKind::neg : ExprKind::pos, line);
      n->args.push_back(parse_unary(false));
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::name) {
      std::string n = next().text;
      auto e = node(ExprKind::constant, line);
      if (n == "true" || n == "True" || n == "false" || n == "False") {
        e->value = Value::boolean(n == "true" || n == "True");
      } else if (n == "none" || n == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::name;
        e->name = n;
      }
      return e;
    }
    if (t.type == Tok::string) {
      std::string s;
      while (cur().type == Tok::string) s += next().text;
      auto e = node(ExprKind::constant, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == Tok::integer || t.type == Tok::floating) {
      auto e = node(ExprKind::constant, line);
      e->value =
          t.type == Tok::integer ? Value::integer(t.int_value) : Value::floating(t.float_value);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, nullptr, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = node(ExprKind::list, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = node(ExprKind::dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    error("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr n) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        n = parse_subscript(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr n) {
    while (true) {
      if (is_op("|")) {
        n = parse_filter(std::move(n), false);
      } else if (is_name("is")) {
        n = parse_test(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr n) {
    const Token& t = next();
    int line = t.line;
    if (t.text == ".") {
      const Token& a = cur();
      if (a.type == Tok::name) {
        auto e = node(ExprKind::getattr, line);
        e->name = next().text;
        e->args.push_back(std::move(n));
        return e;
      }
      if (a.type != Tok::integer) error("expected name or number");
      auto e = node(ExprKind::getitem, line);
      e->args.push_back(std::move(n));
      auto k = node(ExprKind::constant, a.line);
      k->value = Value::integer(a.int_value);
      next();
      e->args.push_back(std::move(k));
      return e;
    }
    std::vector<ExprPtr> subs;
    while (!is_op("]")) {
      if (!subs.empty()) expect_op(",");
      subs.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = node(ExprKind::getitem, line);
    e->args.push_back(std::move(n));
    if (subs.size() == 1) {
      e->args.push_back(std::move(subs[0]));
    } else {
      auto t2 = node(ExprKind::tuple, line);
      t2->args = std::move(subs);
      e->args.push_back(std::move(t2));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      next();
      parts.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      next();
      parts.push_back(std::move(e));
    }
    if (is_op(":")) {
      parts.push_back(nullptr);
    } else if (!is_op("]") && !is_op(",")) {
      parts.push_back(parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) {
        parts.push_back(parse_expression(true));
      } else {
        parts.push_back(nullptr);
      }
    } else {
      parts.push_back(nullptr);
    }
    auto s = node(ExprKind::slice, line);
    s->args = std::move(parts);
    return s;
  }

  void parse_call_args(Expr& e) {
    int line = cur().line;
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) unsupported("*args / **kwargs in calls are not supported");
      if (cur().type == Tok::name && look().type == Tok::op && look().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error("invalid syntax for function call expression", line);
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr n) {
    auto e = node(ExprKind::call, cur().line);
    e->args.push_back(std::move(n));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr n, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      int line = cur().line;
      std::string name = expect_name();
      while (skip_op(".")) name += "." + expect_name();
      auto e = node(ExprKind::filter, line);
      e->name = name;
      e->filter = find_filter(name);  // unknown ones are checked in check_names()
      e->args.push_back(std::move(n));
      if (is_op("(")) parse_call_args(*e);
      n = std::move(e);
    }
    return n;
  }

  ExprPtr parse_test(ExprPtr n) {
    int line = next().line;  // "is"
    bool negated = skip_name("not");
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    auto e = node(ExprKind::test, line);
    e->name = name;
    e->test = find_test(name);
    e->args.push_back(std::move(n));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::name || cur().type == Tok::string ||
                cur().type == Tok::integer || cur().type == Tok::floating || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto nt = node(ExprKind::not_, line);
    nt->args.push_back(std::move(e));
    return nt;
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Program parse_template(const std::string& source, const std::string& name) {
  Program program;
  program.name = name;
  program.body = Parser(tokenize(source)).parse_all();
  return program;
}

}  // namespace parley::jinja
