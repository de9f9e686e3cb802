// The globals transformers' environment gives a template: raise_exception, strftime_now,
// range (the sandbox's 100000 cap), dict, namespace (no underscore names), and jinja2's
// cycler and joiner.
#include <ctime>
#include <vector>

#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/py_strings.h"

namespace parley::jinja {

namespace {

// jinja2.utils.Cycler: next() returns the current item and advances; current; reset().
class CyclerObject : public ObjectData, public std::enable_shared_from_this<CyclerObject> {
 public:
  explicit CyclerObject(ValueList items) : items_(std::move(items)) {}
  Value get_attr(const std::string& name) override {
    auto self = shared_from_this();
    if (name == "current") return items_[pos_];
    if (name == "next") {
      return Value::callable("next", [self](Interpreter&, Args&) {
        Value v = self->items_[self->pos_];
        self->pos_ = (self->pos_ + 1) % self->items_.size();
        return v;
      });
    }
    if (name == "reset") {
      return Value::callable("reset", [self](Interpreter&, Args&) {
        self->pos_ = 0;
        return Value::none();
      });
    }
    return Value::undefined_hint("'Cycler' object has no attribute '" + name + "'");
  }
  std::string repr() const override { return "<jinja2.utils.Cycler object>"; }

 private:
  ValueList items_;
  size_t pos_ = 0;
};

}  // namespace

Value make_globals(const Globals& globals) {
  Value g = Value::dict();
  auto add = [&](const char* name, std::function<Value(Interpreter&, Args&)> fn) {
    g.dict_data().set(S(name), Value::callable(name, std::move(fn)));
  };
  add("raise_exception", [](Interpreter&, Args& a) -> Value {
    auto p = bind_args("raise_exception", a, {{"message", std::nullopt}});
    fail(py_str(p[0]));
  });
  auto now = globals.now;
  add("strftime_now", [now](Interpreter&, Args& a) {
    auto p = bind_args("strftime_now", a, {{"format", std::nullopt}});
    if (!p[0].is_string()) fail("strftime() argument 1 must be str, not " + py_type_name(p[0]));
    std::tm tm{};
    if (now) {
      tm = now();
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    const std::string& fmt = p[0].str();
    if (fmt.empty()) return S("");
    std::vector<char> buf(256 + fmt.size() * 16);
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    return Value::string(std::string(buf.data(), n));
  });
  add("range", [](Interpreter&, Args& a) {
    if (!a.keyword.empty()) fail("range() takes no keyword arguments");
    std::vector<int64_t> n;
    for (const Value& v : a.positional) n.push_back(as_int_arg(v, "range"));
    int64_t start = 0, stop, step = 1;
    if (n.size() == 1) {
      stop = n[0];
    } else if (n.size() == 2 || n.size() == 3) {
      start = n[0], stop = n[1];
      if (n.size() == 3) step = n[2];
    } else {
      fail("range expected at most 3 arguments, got " + std::to_string(n.size()));
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop - step - 1) / -step : 0);
    if (count > 100000) {
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    ValueList out;
    for (int64_t i = 0; i < count; ++i) out.push_back(I(start + i * step));
    return Value::list(std::move(out));
  });
  add("dict", [](Interpreter& in, Args& a) {
    Value d = Value::dict();
    if (a.positional.size() > 1) fail("dict expected at most 1 argument");
    if (!a.positional.empty()) {
      const Value& src = a.positional[0];
      if (src.is_dict()) {
        d.dict_data().items = src.dict_data().items;
      } else {
        for (const Value& pair : in.iterate(src)) {
          ValueList kv = in.iterate(pair);
          if (kv.size() != 2) fail("dictionary update sequence element has wrong length");
          d.dict_data().set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : a.keyword) d.dict_data().set(Value::string(k), v);
    return d;
  });
  add("namespace", [](Interpreter& in, Args& a) {
    Value ns = Value::namespace_object();
    if (a.positional.size() > 1) fail("namespace expected at most 1 argument");
    auto put = [&](const Value& k, const Value& v) {
      if (k.is_string() && !k.str().empty() && k.str()[0] == '_') {
        fail(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
            k.str() + "'. Please rename the attribute.");
      }
      ns.dict_data().set(k, v);
    };
    if (!a.positional.empty()) {
      const Value& src = a.positional[0];
      if (src.is_dict()) {
        for (const auto& [k, v] : src.dict_data().items) put(k, v);
      } else {
        for (const Value& pair : in.iterate(src)) {
          ValueList kv = in.iterate(pair);
          if (kv.size() != 2) fail("dictionary update sequence element has wrong length");
          put(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : a.keyword) put(Value::string(k), v);
    return ns;
  });
  add("cycler", [](Interpreter&, Args& a) {
    if (a.positional.empty()) fail("at least one item has to be provided");
    return Value::object(std::make_shared<CyclerObject>(a.positional));
  });
  add("joiner", [](Interpreter&, Args& a) {
    auto p = bind_args("joiner", a, {{"sep", S(", ")}});
    auto used = std::make_shared<bool>(false);
    std::string sep = py_str(p[0]);
    return Value::callable("joiner", [used, sep](Interpreter&, Args&) {
      if (!*used) {
        *used = true;
        return S("");
      }
      return Value::string(sep);
    });
  });
  return g;
}

}  // namespace parley::jinja
