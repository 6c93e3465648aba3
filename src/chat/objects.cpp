#include "chat/objects.h"

#include "chat/methods.h"
#include "chat/renderer.h"

namespace herd::chat {

std::string Namespace::repr(int depth) const {
  if (in_repr_) return "<Namespace {...}>";
  in_repr_ = true;
  std::string out = "<Namespace {";
  try {
    bool first = true;
    for (const auto& [k, v] : attrs_.entries()) {
      if (!first) out += ", ";
      first = false;
      out += chat::repr(k, depth + 1) + ": " + chat::repr(v, depth + 1);
    }
  } catch (...) {
    in_repr_ = false;
    throw;
  }
  in_repr_ = false;
  return out + "}>";
}

std::optional<Value> Namespace::attr(std::string_view name) const {
  if (const Value* v = attrs_.find(name)) return *v;
  return std::nullopt;
}

std::string LoopContext::repr(int) const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" +
         std::to_string(items_->items.size()) + ">";
}

std::optional<Value> LoopContext::attr(std::string_view name) const {
  // The list may shrink during the loop (list.pop() is allowed), so every index is checked.
  const size_t n = items_->items.size();
  const size_t i = index0_;
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(static_cast<int64_t>(n) - static_cast<int64_t>(i));
  if (name == "revindex0") return Value(static_cast<int64_t>(n) - static_cast<int64_t>(i) - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i + 1 == n);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(1);
  if (name == "depth0") return Value(0);
  if (name == "previtem") {
    if (i == 0 || i - 1 >= n) return Value::undefined("there is no previous item");
    return items_->items[i - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n) return Value::undefined("there is no next item");
    return items_->items[i + 1];
  }
  if (name == "cycle") {
    return make_function("cycle", [i](Renderer&, CallArgs& args) -> Value {
      if (args.positional.empty()) fail("no items for cycling given");
      return args.positional[i % args.positional.size()];
    });
  }
  if (name == "changed") {
    const LoopContext* self = this;
    return make_function("changed", [self](Renderer&, CallArgs& args) -> Value {
      Value current = Value::tuple(args.positional);
      if (!self->last_changed_.is_undefined() && py_equal(self->last_changed_, current))
        return Value(false);
      self->last_changed_ = std::move(current);
      return Value(true);
    });
  }
  return std::nullopt;
}

std::optional<Value> Macro::attr(std::string_view name) const {
  if (name == "name") return Value(def_->name);
  if (name == "arguments") {
    std::vector<Value> names;
    for (const auto& n : def_->param_names) names.emplace_back(n);
    return Value::tuple(std::move(names));
  }
  if (name == "catch_kwargs") return Value(def_->uses_kwargs);
  if (name == "catch_varargs") return Value(def_->uses_varargs);
  if (name == "caller") return Value(def_->uses_caller);
  return std::nullopt;
}

Value Macro::call(Renderer& r, CallArgs& args) {
  return r.call_macro(*def_, closure_, args);
}

Value BoundMethod::call(Renderer& r, CallArgs& args) {
  return call_method(r, receiver_, name_, args);
}

Value make_generator(std::string name, std::vector<Value> items) {
  return Value(
      std::shared_ptr<Object>(std::make_shared<Generator>(std::move(name), std::move(items))));
}

Value make_function(std::string name, Function::Impl impl) {
  return Value(
      std::shared_ptr<Object>(std::make_shared<Function>(std::move(name), std::move(impl))));
}

std::vector<std::optional<Value>> bind_args(const CallArgs& args, std::string_view function,
                                            std::initializer_list<std::string_view> names) {
  std::vector<std::optional<Value>> out(names.size());
  if (args.positional.size() > names.size()) {
    fail(std::string(function) + "() takes at most " + std::to_string(names.size()) +
         " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (const auto& n : names) {
      if (n == key) break;
      ++i;
    }
    if (i == names.size())
      fail(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    if (out[i]) fail(std::string(function) + "() got multiple values for argument '" + key + "'");
    out[i] = value;
  }
  return out;
}

}  // namespace herd::chat
