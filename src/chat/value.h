// Value: the data a chat template computes with, modelled on the Python objects Jinja2
// sees (None, bool, int, float, str, list, tuple, dict, Jinja2's Undefined, Markup strings,
// and a few objects such as namespace() and loop). Lists and dicts are shared by pointer
// like Python objects; the sandbox forbids mutating them except list.pop() and
// list.clear(), which act in place. Objects that refer back into a rendering (namespaces,
// loop contexts, scopes) are owned by that rendering; Values never outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace herd::chat {

// An error inside the engine, before the line number is known. Template::render and
// Template::parse turn it into herd::Error("[chat] line N: ...").
class RenderError : public std::runtime_error {
 public:
  // line 0: not known where it is thrown; the renderer adds the line it was executing.
  explicit RenderError(const std::string& message, int line = 0)
      : std::runtime_error(message), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};
[[noreturn]] void fail(const std::string& message);
[[noreturn]] void fail_at(int line, const std::string& message);

class Value;
class Object;
class Renderer;
struct List;
class Dict;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint) {
    Value v;
    if (!hint.empty()) v.ptr_ = std::make_shared<std::string>(std::move(hint));
    return v;
  }
  static Value none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
  }
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  Value(bool b) : kind_(Kind::Bool) { scalar_.b = b; }
  Value(int64_t i) : kind_(Kind::Int) { scalar_.i = i; }
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(size_t i) : Value(static_cast<int64_t>(i)) {}
  Value(double f) : kind_(Kind::Float) { scalar_.f = f; }
  // Strings are shared, not copied, when Values are copied (as Python shares str objects):
  // a template holding many references to one large string must not multiply its size.
  Value(std::string s) : kind_(Kind::String), ptr_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(std::shared_ptr<const List> list);
  Value(std::shared_ptr<const Dict> dict);
  Value(std::shared_ptr<Object> object);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || is_bool(); }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const;
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const { return scalar_.b; }
  int64_t as_int() const { return kind_ == Kind::Bool ? scalar_.b : scalar_.i; }
  double as_float() const {
    return kind_ == Kind::Float ? scalar_.f : static_cast<double>(as_int());
  }
  // REQUIRES: is_string().
  const std::string& as_string() const { return *static_cast<const std::string*>(ptr_.get()); }
  // For Undefined: the message of the error raised when it is misused ("" if none).
  const std::string& undefined_hint() const {
    static const std::string kNoHint;
    return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : kNoHint;
  }
  const List& as_list() const { return *static_cast<const List*>(ptr_.get()); }
  std::shared_ptr<const List> list_ptr() const {
    return std::static_pointer_cast<const List>(ptr_);
  }
  const Dict& as_dict() const { return *static_cast<const Dict*>(ptr_.get()); }
  Object* as_object() const { return static_cast<Object*>(ptr_.get()); }
  const void* identity() const { return ptr_.get(); }

 private:
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  union {
    bool b;
    int64_t i;
    double f;
  } scalar_{};
  std::shared_ptr<void> ptr_;  // the string, list, dict, object or undefined hint
};

// Lists and dicts may nest at most this deep: deeper values would make destruction,
// printing and comparison recurse too far. Building a deeper one is a RenderError.
constexpr uint32_t kMaxNesting = 256;

struct List {
  std::vector<Value> items;
  uint32_t depth = 1;  // set when wrapped in a Value
  bool is_tuple = false;
  // Non-empty for dict views (d.items(), d.keys(), d.values()): they print as
  // "dict_items([...])" and cannot be indexed.
  std::string_view view;
};

// An insertion-ordered dict with Python key equality (1 == 1.0 == True).
class Dict {
 public:
  // Returns nullptr when the key is absent (or unhashable).
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts or replaces (keeping the first position), like Python's d[k] = v.
  // Throws RenderError for unhashable keys.
  void set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  uint32_t depth = 1;  // set when wrapped in a Value

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;  // only for larger dicts
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

inline bool Value::is_tuple() const {
  return kind_ == Kind::List && as_list().is_tuple;
}

// Objects with behaviour (namespace, loop, functions, macros, generators).
class Object {
 public:
  virtual ~Object() = default;
  // Python's type name, for messages ("Namespace", "LoopContext", "function").
  virtual std::string type_name() const = 0;
  virtual std::string repr(int depth) const = 0;  // depth: nesting so far, bounded
  // Python getattr(); nullopt when the object has no such attribute.
  virtual std::optional<Value> attr(std::string_view name) const { return std::nullopt; }
  virtual bool callable() const { return false; }
  virtual Value call(Renderer& renderer, CallArgs& args);
  // One-shot iterators (generators) return their items once, then nothing.
  virtual bool iterable() const { return false; }
  virtual std::vector<Value> iterate() { return {}; }
  // How deeply this object nests the values it owns (see kMaxNesting); objects owned by the
  // rendering (namespaces, loops) own nothing in this sense.
  virtual uint32_t nesting() const { return 0; }
};

// The nesting depth of a value (0 for scalars), and the depth of a container holding
// children of depth `child_depth`; throws RenderError beyond kMaxNesting.
uint32_t nesting_of(const Value& v);
uint32_t checked_depth(uint32_t child_depth);

// Python semantics.
bool truthy(const Value& v);
std::string to_str(const Value& v);               // str(v); Undefined -> ""
std::string repr(const Value& v, int depth = 0);  // repr(v); depth: nesting so far
std::string type_name(const Value& v);            // 'str', 'int', 'dict', ...
std::string float_repr(double d);
std::string string_repr(std::string_view s);
bool py_equal(const Value& a, const Value& b);
// <0, 0, >0 like Python's ordering; throws RenderError for unorderable types ("'<' not
// supported between instances of 'str' and 'int'").
int py_compare(const Value& a, const Value& b, const char* op = "<");
bool is_hashable(const Value& v);
// Python len(); throws RenderError when the value has no length.
size_t py_len(const Value& v);
// Python iter(): the items iteration yields (dict keys, string characters, ...). Undefined
// iterates as empty; throws RenderError for non-iterables. The result may be a fresh list:
// keep the pointer alive while iterating (not `for (x : py_iterate(v)->items)`).
std::shared_ptr<const List> py_iterate(const Value& v);
bool py_iterable(const Value& v);

Value from_json(const nlohmann::ordered_json& j);

// Jinja2's markupsafe.escape() of a string.
std::string html_escape(std::string_view s);

}  // namespace herd::chat
