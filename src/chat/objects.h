// The objects templates meet besides plain data: namespace(), the loop variable, macros,
// built-in functions, bound methods ("a,b".split) and the one-shot generators some filters
// return (select, map, items, ...), each with Jinja2's observable behaviour (repr, truthiness,
// attributes).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace herd::chat {

struct Scope;

class Namespace : public Object {
 public:
  explicit Namespace(Dict attrs) : attrs_(std::move(attrs)) {}
  std::string type_name() const override { return "Namespace"; }
  std::string repr(int depth) const override;
  std::optional<Value> attr(std::string_view name) const override;
  void set(const std::string& name, Value value) { attrs_.set(Value(name), std::move(value)); }

 private:
  Dict attrs_;
  mutable bool in_repr_ = false;  // repr of a namespace that contains itself
};

class LoopContext : public Object {
 public:
  explicit LoopContext(std::shared_ptr<const List> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr(int depth) const override;
  std::optional<Value> attr(std::string_view name) const override;
  void set_index(size_t i) { index0_ = i; }

 private:
  std::shared_ptr<const List> items_;
  size_t index0_ = 0;
  // loop.changed() state. The function object refers back to this loop by a plain pointer
  // (the rendering owns both), so a value stored here cannot form an owning cycle.
  mutable Value last_changed_;
};

// A built-in function (range, dict, namespace, raise_exception, ...).
class Function : public Object {
 public:
  using Impl = std::function<Value(Renderer&, CallArgs&)>;
  Function(std::string name, Impl impl) : name_(std::move(name)), impl_(std::move(impl)) {}
  std::string type_name() const override { return "function"; }
  std::string repr(int depth) const override { return "<function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Renderer& r, CallArgs& args) override { return impl_(r, args); }

 private:
  std::string name_;
  Impl impl_;
};

class Macro : public Object {
 public:
  Macro(const MacroDef* def, Scope* closure) : def_(def), closure_(closure) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr(int depth) const override { return "<Macro '" + def_->name + "'>"; }
  std::optional<Value> attr(std::string_view name) const override;
  bool callable() const override { return true; }
  Value call(Renderer& r, CallArgs& args) override;

 private:
  const MacroDef* def_;
  Scope* closure_;
};

// receiver.name, a method of str, dict or list looked up but not (yet) called.
class BoundMethod : public Object {
 public:
  BoundMethod(Value receiver, std::string name)
      : receiver_(std::move(receiver)),
        name_(std::move(name)),
        nesting_(checked_depth(nesting_of(receiver_))) {}
  uint32_t nesting() const override { return nesting_; }
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr(int depth) const override {
    return "<built-in method " + name_ + " of " + chat::type_name(receiver_) + " object>";
  }
  bool callable() const override { return true; }
  Value call(Renderer& r, CallArgs& args) override;

 private:
  Value receiver_;
  std::string name_;
  uint32_t nesting_;
};

// A Python generator or iterator: truthy, no len(), iterates once.
class Generator : public Object {
 public:
  Generator(std::string name, std::vector<Value> items)
      : name_(std::move(name)), items_(std::move(items)) {
    uint32_t child = 0;
    for (const auto& item : items_) child = std::max(child, nesting_of(item));
    nesting_ = checked_depth(child);
  }
  uint32_t nesting() const override { return nesting_; }
  std::string type_name() const override { return name_; }
  std::string repr(int depth) const override { return "<" + name_ + " object>"; }
  bool iterable() const override { return true; }
  std::vector<Value> iterate() override {
    std::vector<Value> out = std::move(items_);
    items_.clear();
    return out;
  }

 private:
  std::string name_;
  std::vector<Value> items_;
  uint32_t nesting_ = 1;
};

Value make_generator(std::string name, std::vector<Value> items);
Value make_function(std::string name, Function::Impl impl);

// Binds call arguments to Python-style parameters of a built-in ("indent(s, width=4,
// first=False)"): returns one optional per name; throws on unknown or duplicate arguments.
std::vector<std::optional<Value>> bind_args(const CallArgs& args, std::string_view function,
                                            std::initializer_list<std::string_view> names);

}  // namespace herd::chat
