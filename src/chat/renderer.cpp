#include "chat/renderer.h"

#include <chrono>

#include "chat/globals.h"
#include "chat/methods.h"
#include "chat/objects.h"
#include "chat/operators.h"
#include "chat/py_string.h"
#include "chat/unicode.h"

namespace herd::chat {
namespace {

// Bound on nested evaluation (statements, expressions, macro calls together), so that
// recursive macros end in an error rather than a stack overflow. The real templates of
// expected.jsonl stay below 40; 500 levels need about 250 KB of stack in a release build.
constexpr int kMaxDepth = 500;
// Bound on scopes and objects one rendering may create.
constexpr size_t kMaxAllocations = 2'000'000;

// Joins pieces with append(): GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
std::string concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out.append(p);
  return out;
}

std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

Value missing_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(
      concat({"'", object_description(obj), "' has no attribute '", name, "'"}));
}

Value unsafe_attribute(const Value& obj, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                          "' object is unsafe.");
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (v.is_int() || v.is_bool()) return v.as_int();
  fail("slice indices must be integers or None or have an __index__ method");
}

}  // namespace

class DepthGuard {
 public:
  explicit DepthGuard(Renderer& r) : r_(r) {
    if (++r_.depth_ > kMaxDepth)
      fail("template recursion too deep (more than " + std::to_string(kMaxDepth) +
           " nested evaluations)");
  }
  ~DepthGuard() { --r_.depth_; }

 private:
  Renderer& r_;
};

Renderer::Renderer(const Program& program, const RenderOptions& options)
    : program_(program), options_(options) {}

Renderer::~Renderer() = default;

void Renderer::budget_exceeded() const {
  fail("template exceeded its evaluation budget of " + std::to_string(options_.max_steps) +
       " steps");
}

void Renderer::check_size(size_t n) const {
  if (n > options_.max_output_bytes)
    fail("string of " + std::to_string(n) + " bytes exceeds the limit of " +
         std::to_string(options_.max_output_bytes) + " bytes");
}

std::tm Renderer::now() const {
  if (options_.now) return options_.now();
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

Scope* Renderer::new_scope(Scope* parent) {
  if (scopes_.size() + owned_.size() > kMaxAllocations) fail("template created too many scopes");
  scopes_.emplace_back();
  scopes_.back().parent = parent;
  return &scopes_.back();
}

Value Renderer::make_namespace(Dict attributes) {
  if (scopes_.size() + owned_.size() > kMaxAllocations) fail("template created too many objects");
  owned_.push_back(std::make_unique<Namespace>(std::move(attributes)));
  // Not owning: the rendering owns namespaces, so cycles through them cannot leak.
  return Value(std::shared_ptr<Object>(std::shared_ptr<Object>(), owned_.back().get()));
}

Value Renderer::make_loop_context(std::shared_ptr<const List> items) {
  if (scopes_.size() + owned_.size() > kMaxAllocations) fail("template created too many objects");
  owned_.push_back(std::make_unique<LoopContext>(std::move(items)));
  return Value(std::shared_ptr<Object>(std::shared_ptr<Object>(), owned_.back().get()));
}

std::string Renderer::render(const nlohmann::ordered_json& variables) {
  Scope* context = new_scope(nullptr);
  for (size_t id = 0; id < program_.symbols.size(); ++id) {
    const std::string& name = program_.symbols[id];
    if (variables.is_object()) {
      auto it = variables.find(name);
      if (it != variables.end()) {
        context->set(static_cast<int>(id), from_json(*it));
        continue;
      }
    }
    if (auto g = make_global(name)) context->set(static_cast<int>(id), std::move(*g));
  }
  Scope* root = new_scope(context);
  std::string out;
  exec_body(program_.body, root, out);
  return out;
}

// ---------------------------------------------------------------------------------------
// Statements

void Renderer::append(std::string& out, std::string_view text) {
  check_size(out.size() + text.size());
  step(text.size() / 64);
  out += text;
}

Flow Renderer::exec_body(const Body& body, Scope* scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Renderer::render_block(const Body& body, Scope* scope) {
  std::string out;
  exec_body(body, scope, out);
  return out;
}

Flow Renderer::exec(const Stmt& s, Scope* scope, std::string& out) {
  DepthGuard guard(*this);
  step();
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::Text:
      append(out, s.text);
      return Flow::Normal;
    case StmtKind::Output: {
      const Value v = eval(*s.expr, scope);
      if (v.is_string()) {
        append(out, v.as_string());
      } else if (!v.is_undefined()) {
        append(out, to_str(v));
      }
      return Flow::Normal;
    }
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches) {
        line_ = s.line;
        if (!cond || truthy(eval(*cond, scope))) return exec_body(body, scope, out);
      }
      return Flow::Normal;
    case StmtKind::For:
      exec_for(s, scope, out);
      return Flow::Normal;
    case StmtKind::Set:
      exec_set(s, scope);
      return Flow::Normal;
    case StmtKind::SetBlock: {
      Value v(render_block(s.body, new_scope(scope)));
      v = apply_filter_chain(s.filters, std::move(v), scope);
      assign(*s.target, std::move(v), scope);
      return Flow::Normal;
    }
    case StmtKind::Macro:
      scope->set(s.macro->symbol,
                 Value(std::shared_ptr<Object>(std::make_shared<Macro>(s.macro.get(), scope))));
      return Flow::Normal;
    case StmtKind::CallBlock:
      exec_call_block(s, scope, out);
      return Flow::Normal;
    case StmtKind::FilterBlock: {
      Value v(render_block(s.body, new_scope(scope)));
      v = apply_filter_chain(s.filters, std::move(v), scope);
      append(out, to_str(v));
      return Flow::Normal;
    }
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
    case StmtKind::With: {
      Scope* inner = new_scope(scope);
      for (const auto& [target, value] : s.assignments) assign(*target, eval(*value, scope), inner);
      return exec_body(s.body, inner, out);
    }
    case StmtKind::Body:
      return exec_body(s.body, scope, out);
  }
  return Flow::Normal;
}

void Renderer::exec_for(const Stmt& s, Scope* scope, std::string& out) {
  const Value iterable = eval(*s.expr, scope);
  std::shared_ptr<const List> items = py_iterate(iterable);
  if (s.cond) {
    Scope* filter_scope = new_scope(scope);
    auto kept = std::make_shared<List>();
    for (const auto& item : items->items) {
      step();
      filter_scope->vars.clear();
      assign(*s.target, item, filter_scope);
      if (truthy(eval(*s.cond, filter_scope))) kept->items.push_back(item);
    }
    items = std::move(kept);
  }
  if (items->items.empty()) {
    exec_body(s.else_body, new_scope(scope), out);
    return;
  }
  Scope* iteration = new_scope(scope);
  const Value loop = make_loop_context(items);
  auto* loop_context = static_cast<LoopContext*>(loop.as_object());
  for (size_t i = 0; i < items->items.size(); ++i) {
    step();
    // Variables set in a loop body live for one iteration (Jinja2 scoping).
    iteration->vars.clear();
    iteration->set(kSymLoop, loop);
    loop_context->set_index(i);
    assign(*s.target, items->items[i], iteration);
    if (exec_body(s.body, iteration, out) == Flow::Break) break;
  }
}

void Renderer::exec_set(const Stmt& s, Scope* scope) {
  assign(*s.target, eval(*s.expr, scope), scope);
}

void Renderer::assign(const Expr& target, Value value, Scope* scope) {
  switch (target.kind) {
    case ExprKind::Name:
      scope->set(target.symbol, std::move(value));
      return;
    case ExprKind::Tuple: {
      const auto items = py_iterate(value);
      const size_t want = target.children.size();
      if (items->items.size() > want)
        fail("too many values to unpack (expected " + std::to_string(want) + ")");
      if (items->items.size() < want)
        fail("not enough values to unpack (expected " + std::to_string(want) + ", got " +
             std::to_string(items->items.size()) + ")");
      for (size_t i = 0; i < want; ++i) assign(*target.children[i], items->items[i], scope);
      return;
    }
    case ExprKind::GetAttr: {
      const Value ns = lookup(*target.children[0], scope);
      auto* n = ns.is_object() ? dynamic_cast<Namespace*>(ns.as_object()) : nullptr;
      if (!n) fail("cannot assign attribute on non-namespace object");
      n->set(target.name, std::move(value));
      return;
    }
    default:
      fail("cannot assign to this expression");
  }
}

void Renderer::exec_call_block(const Stmt& s, Scope* scope, std::string& out) {
  const Expr& call = *s.expr;
  Value callee = eval(*call.children[0], scope);
  CallArgs args;
  eval_args(call, 1, scope, args);
  args.keyword.emplace_back(
      "caller", Value(std::shared_ptr<Object>(std::make_shared<Macro>(s.macro.get(), scope))));
  const Value v = this->call(callee, args);
  append(out, to_str(v));
}

Value Renderer::apply_filter_chain(const std::vector<ExprPtr>& filters, Value input, Scope* scope) {
  for (const auto& f : filters) input = eval_filter(*f, std::move(input), scope);
  return input;
}

Value Renderer::call_macro(const MacroDef& m, Scope* closure, CallArgs& args) {
  DepthGuard guard(*this);
  step();
  Scope* s = new_scope(closure);
  const size_t n = m.params.size();
  if (args.positional.size() > n && !m.uses_varargs)
    fail("macro '" + m.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  std::vector<bool> bound(n, false);
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) {
    s->set(m.params[i], args.positional[i]);
    bound[i] = true;
  }
  auto extra_kwargs = std::make_shared<Dict>();
  Value caller;
  for (auto& [key, value] : args.keyword) {
    size_t j = 0;
    while (j < n && m.param_names[j] != key) ++j;
    if (j < n) {
      if (bound[j]) fail("macro '" + m.name + "' got multiple values for argument '" + key + "'");
      s->set(m.params[j], value);
      bound[j] = true;
    } else if (key == "caller" && m.uses_caller) {
      caller = value;
    } else if (m.uses_kwargs) {
      extra_kwargs->set(Value(key), value);
    } else {
      fail("macro '" + m.name + "' takes no keyword argument '" + key + "'");
    }
  }
  for (size_t j = 0; j < n; ++j) {
    if (bound[j]) continue;
    if (m.defaults[j]) {
      s->set(m.params[j], eval(*m.defaults[j], s));
    } else {
      s->set(m.params[j],
             Value::undefined("parameter '" + m.param_names[j] + "' was not provided"));
    }
  }
  if (m.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    s->set(kSymVarargs, Value::tuple(std::move(rest)));
  }
  if (m.uses_kwargs)
    s->set(kSymKwargs, Value(std::shared_ptr<const Dict>(std::move(extra_kwargs))));
  if (m.uses_caller) s->set(kSymCaller, caller);
  const int saved_line = line_;
  std::string out;
  exec_body(m.body, s, out);
  line_ = saved_line;
  return Value(std::move(out));
}

// ---------------------------------------------------------------------------------------
// Expressions

Value Renderer::lookup(const Expr& name, Scope* scope) {
  for (Scope* s = scope; s; s = s->parent) {
    if (Value* v = s->find_local(name.symbol)) return *v;
  }
  return Value::undefined("'" + name.name + "' is undefined");
}

Value Renderer::eval(const Expr& e, Scope* scope) {
  DepthGuard guard(*this);
  step();
  switch (e.kind) {
    case ExprKind::Const:
      return e.value;
    case ExprKind::Name:
      return lookup(e, scope);
    case ExprKind::List:
    case ExprKind::Tuple:
    case ExprKind::Dict:
      return eval_literal(e, scope);
    case ExprKind::GetAttr:
      return getattr(eval(*e.children[0], scope), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.children[0], scope);
      return getitem(obj, eval(*e.children[1], scope));
    }
    case ExprKind::Slice:
      return eval_slice(e, scope);
    case ExprKind::Call:
      return eval_call(e, scope);
    case ExprKind::Filter:
      return eval_filter(e, eval(*e.children[0], scope), scope);
    case ExprKind::Test:
      return eval_test(e, scope);
    case ExprKind::Not:
      return Value(!truthy(eval(*e.children[0], scope)));
    case ExprKind::Neg:
      return negate(eval(*e.children[0], scope));
    case ExprKind::Pos:
      return unary_plus(eval(*e.children[0], scope));
    case ExprKind::Binary: {
      const Value a = eval(*e.children[0], scope);
      return binary_op(*this, e.bin_op, a, eval(*e.children[1], scope));
    }
    case ExprKind::Compare:
      return eval_compare(e, scope);
    case ExprKind::And: {
      Value a = eval(*e.children[0], scope);
      if (!truthy(a)) return a;
      return eval(*e.children[1], scope);
    }
    case ExprKind::Or: {
      Value a = eval(*e.children[0], scope);
      if (truthy(a)) return a;
      return eval(*e.children[1], scope);
    }
    case ExprKind::CondExpr:
      if (truthy(eval(*e.children[0], scope))) return eval(*e.children[1], scope);
      if (e.children[2]) return eval(*e.children[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::Concat: {
      std::string s;
      for (const auto& c : e.children) {
        const Value v = eval(*c, scope);
        if (v.is_string()) {
          s += v.as_string();
        } else {
          s += to_str(v);
        }
        check_size(s.size());
      }
      step(s.size() / 64);
      return Value(std::move(s));
    }
  }
  return Value();
}

Value Renderer::eval_literal(const Expr& e, Scope* scope) {
  if (e.kind == ExprKind::Dict) {
    auto d = std::make_shared<Dict>();
    for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
      Value k = eval(*e.children[i], scope);
      d->set(std::move(k), eval(*e.children[i + 1], scope));
    }
    return Value(std::shared_ptr<const Dict>(std::move(d)));
  }
  std::vector<Value> items;
  items.reserve(e.children.size());
  for (const auto& c : e.children) items.push_back(eval(*c, scope));
  return e.kind == ExprKind::Tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value Renderer::eval_slice(const Expr& e, Scope* scope) {
  const Value obj = eval(*e.children[0], scope);
  std::optional<int64_t> bounds[3];
  for (int i = 0; i < 3; ++i)
    if (e.children[i + 1]) bounds[i] = slice_bound(eval(*e.children[i + 1], scope));
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_string()) {
    std::string s = py_slice_string(obj.as_string(), bounds[0], bounds[1], bounds[2]);
    return obj.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
  }
  if (obj.is_list() && obj.as_list().view.empty()) {
    auto items = py_slice_items(obj.as_list().items, bounds[0], bounds[1], bounds[2]);
    return obj.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  return Value::undefined(concat({"'", object_description(obj), "' is not sliceable"}));
}

void Renderer::eval_args(const Expr& e, size_t first, Scope* scope, CallArgs& args) {
  for (size_t i = first; i < e.children.size(); ++i)
    args.positional.push_back(eval(*e.children[i], scope));
  if (e.star_args) {
    const auto items = py_iterate(eval(*e.star_args, scope));
    for (const auto& v : items->items) args.positional.push_back(v);
  }
  for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, scope));
  if (e.star_kwargs) {
    const Value kw = eval(*e.star_kwargs, scope);
    if (!kw.is_dict()) fail("argument after ** must be a mapping, not " + type_name(kw));
    for (const auto& [k, v] : kw.as_dict().entries()) {
      if (!k.is_string()) fail("keywords must be strings");
      args.keyword.emplace_back(k.as_string(), v);
    }
  }
}

Value Renderer::eval_call(const Expr& e, Scope* scope) {
  const Expr& callee = *e.children[0];
  if (callee.kind == ExprKind::GetAttr) {
    // obj.method(...): call str/dict/list methods directly, without a bound-method object.
    const Value obj = eval(*callee.children[0], scope);
    if (find_method(obj, callee.name) != MethodKind::Missing) {
      CallArgs args;
      eval_args(e, 1, scope, args);
      line_ = e.line;
      return call_method(*this, obj, callee.name, args);
    }
    const Value f = getattr(obj, callee.name);
    CallArgs args;
    eval_args(e, 1, scope, args);
    line_ = e.line;
    return call(f, args);
  }
  const Value f = eval(callee, scope);
  CallArgs args;
  eval_args(e, 1, scope, args);
  line_ = e.line;
  return call(f, args);
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.is_object() && callee.as_object()->callable())
    return callee.as_object()->call(*this, args);
  if (callee.is_undefined()) undefined_error(callee);
  fail(concat({"'", type_name(callee), "' object is not callable"}));
}

Value Renderer::eval_filter(const Expr& e, Value input, Scope* scope) {
  CallArgs args;
  eval_args(e, 1, scope, args);
  line_ = e.line;
  if (!e.filter) fail("no filter named '" + e.name + "' found");
  return e.filter(*this, input, args);
}

Value Renderer::eval_test(const Expr& e, Scope* scope) {
  const Value input = eval(*e.children[0], scope);
  CallArgs args;
  eval_args(e, 1, scope, args);
  line_ = e.line;
  if (!e.test) fail("no test named '" + e.name + "' found");
  return Value(e.test(*this, input, args));
}

Value Renderer::eval_compare(const Expr& e, Scope* scope) {
  Value left = eval(*e.children[0], scope);
  for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
    Value right = eval(*e.children[i + 1], scope);
    if (!compare(e.cmp_ops[i], left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

// ---------------------------------------------------------------------------------------
// Sandboxed attribute and item access

Value Renderer::getattr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      undefined_error(obj);
    case Kind::Object:
      if (auto v = obj.as_object()->attr(name)) return std::move(*v);
      return missing_attribute(obj, name);
    case Kind::String:
    case Kind::List:
    case Kind::Dict:
      switch (find_method(obj, name)) {
        case MethodKind::Safe:
          return Value(
              std::shared_ptr<Object>(std::make_shared<BoundMethod>(obj, std::string(name))));
        case MethodKind::Unsafe:
          return unsafe_attribute(obj, name);
        case MethodKind::Missing:
          break;
      }
      if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find(name)) return *v;
      }
      return missing_attribute(obj, name);
    default:
      return missing_attribute(obj, name);
  }
}

Value Renderer::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::Undefined:
      undefined_error(obj);
    case Kind::Dict:
      if (const Value* v = obj.as_dict().find(key)) return *v;
      break;
    case Kind::List:
      if ((key.is_int() || key.is_bool()) && obj.as_list().view.empty()) {
        const auto& items = obj.as_list().items;
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(items.size());
        if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[i];
        return Value::undefined(concat(
            {"'", object_description(obj), "' has no element ", std::to_string(key.as_int())}));
      }
      break;
    case Kind::String:
      if (key.is_int() || key.is_bool()) {
        const int64_t n = static_cast<int64_t>(code_point_count(obj.as_string()));
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined(concat(
              {"'", object_description(obj), "' has no element ", std::to_string(key.as_int())}));
        std::string c = py_slice_string(obj.as_string(), i, i + 1, std::nullopt);
        return obj.is_markup() ? Value::markup(std::move(c)) : Value(std::move(c));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  return Value::undefined(concat({"'", object_description(obj), "' has no element ", repr(key)}));
}

}  // namespace herd::chat
