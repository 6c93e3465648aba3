#include <unordered_map>

#include "chat/filters.h"
#include "chat/methods.h"
#include "chat/operators.h"
#include "chat/renderer.h"

// Jinja2's tests (`x is defined`, `x is divisibleby 3`, ...), with Python's type rules:
// bool counts as a number but not as an integer; Undefined is a sequence, iterable and
// callable (it defines __len__, __iter__ and __call__).
namespace herd::chat {
namespace {

const Value& one_arg(const CallArgs& a, const char* test) {
  if (a.positional.size() != 1 || !a.keyword.empty())
    fail(std::string("test '") + test + "' takes exactly one argument");
  return a.positional[0];
}

void no_args(const CallArgs& a, const char* test) {
  if (!a.positional.empty() || !a.keyword.empty())
    fail(std::string("test '") + test + "' takes no arguments");
}

#define HERD_SIMPLE_TEST(fn, expr)                  \
  bool fn(Renderer&, const Value& v, CallArgs& a) { \
    no_args(a, #fn);                                \
    return (expr);                                  \
  }

HERD_SIMPLE_TEST(t_defined, !v.is_undefined())
HERD_SIMPLE_TEST(t_undefined, v.is_undefined())
HERD_SIMPLE_TEST(t_none, v.is_none())
HERD_SIMPLE_TEST(t_boolean, v.is_bool())
HERD_SIMPLE_TEST(t_true, v.is_bool() && v.as_bool())
HERD_SIMPLE_TEST(t_false, v.is_bool() && !v.as_bool())
HERD_SIMPLE_TEST(t_integer, v.is_int())
HERD_SIMPLE_TEST(t_float, v.is_float())
HERD_SIMPLE_TEST(t_number, v.is_number())
HERD_SIMPLE_TEST(t_string, v.is_string())
HERD_SIMPLE_TEST(t_mapping, v.is_dict())
HERD_SIMPLE_TEST(t_iterable, py_iterable(v))
HERD_SIMPLE_TEST(t_sequence, v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
HERD_SIMPLE_TEST(t_callable, v.is_undefined() || (v.is_object() && v.as_object()->callable()))
HERD_SIMPLE_TEST(t_escaped, v.is_markup())
#undef HERD_SIMPLE_TEST

int64_t mod_of(const Value& v, int64_t d) {
  if (v.is_undefined()) undefined_error(v);
  if (!(v.is_int() || v.is_bool()))
    fail("odd/even/divisibleby need an integer, not " + type_name(v));
  if (d == 0) fail("integer division or modulo by zero");
  int64_t m = v.as_int() % d;
  if (m != 0 && ((m < 0) != (d < 0))) m += d;
  return m;
}

bool t_odd(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return mod_of(v, 2) == 1;
}
bool t_even(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return mod_of(v, 2) == 0;
}
bool t_divisibleby(Renderer&, const Value& v, CallArgs& a) {
  const Value& d = one_arg(a, "divisibleby");
  if (!(d.is_int() || d.is_bool())) fail("divisibleby needs an integer");
  return mod_of(v, d.as_int()) == 0;
}
bool t_lower(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  CallArgs none;
  return truthy(call_method(r, Value(to_str(v)), "islower", none));
}
bool t_upper(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  CallArgs none;
  return truthy(call_method(r, Value(to_str(v)), "isupper", none));
}
bool t_sameas(Renderer&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::None:
    case Kind::Undefined:
      return true;
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
    case Kind::String:
      return py_equal(v, o);
    default:
      return v.identity() == o.identity();
  }
}
bool t_in(Renderer&, const Value& v, CallArgs& a) {
  return contains(one_arg(a, "in"), v);
}
bool t_eq(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Eq, v, one_arg(a, "eq"));
}
bool t_ne(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Ne, v, one_arg(a, "ne"));
}
bool t_lt(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Lt, v, one_arg(a, "lt"));
}
bool t_le(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Le, v, one_arg(a, "le"));
}
bool t_gt(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Gt, v, one_arg(a, "gt"));
}
bool t_ge(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Ge, v, one_arg(a, "ge"));
}
bool t_filter(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"boolean", t_boolean},
      {"callable", t_callable},
      {"defined", t_defined},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"escaped", t_escaped},
      {"even", t_even},
      {"false", t_false},
      {"filter", t_filter},
      {"float", t_float},
      {"ge", t_ge},
      {">=", t_ge},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"in", t_in},
      {"integer", t_integer},
      {"iterable", t_iterable},
      {"le", t_le},
      {"<=", t_le},
      {"lower", t_lower},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"mapping", t_mapping},
      {"ne", t_ne},
      {"!=", t_ne},
      {"none", t_none},
      {"number", t_number},
      {"odd", t_odd},
      {"sameas", t_sameas},
      {"sequence", t_sequence},
      {"string", t_string},
      {"test", t_test},
      {"true", t_true},
      {"undefined", t_undefined},
      {"upper", t_upper},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  const auto& t = test_table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace herd::chat
