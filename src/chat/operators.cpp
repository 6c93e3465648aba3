#include "chat/operators.h"

#include <cmath>
#include <limits>

#include "chat/methods.h"
#include "chat/py_string.h"
#include "chat/renderer.h"

namespace herd::chat {
namespace {

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::Add:
      return "+";
    case BinOp::Sub:
      return "-";
    case BinOp::Mul:
      return "*";
    case BinOp::Div:
      return "/";
    case BinOp::FloorDiv:
      return "//";
    case BinOp::Mod:
      return "%";
    case BinOp::Pow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::Add && a.is_string())
    fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
  if (op == BinOp::Add && a.is_list() && !a.is_tuple())
    fail("can only concatenate list (not \"" + type_name(b) + "\") to list");
  fail(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) +
       "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
  fail("integer result too large");
}

Value repeat(Renderer& r, const Value& seq, int64_t n) {
  if (n <= 0)
    return seq.is_string() ? Value("") : (seq.is_tuple() ? Value::tuple({}) : Value::list({}));
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > r.options().max_output_bytes / s.size())
      fail("string repetition result too large");
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out += s;
    r.step(out.size() / 64);
    return Value(std::move(out));
  }
  const auto& items = seq.as_list().items;
  if (!items.empty() && static_cast<uint64_t>(n) > 10'000'000 / items.size())
    fail("list repetition result too large");
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  r.step(out.size());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

double float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}

}  // namespace

void undefined_error(const Value& u) {
  fail(u.undefined_hint().empty() ? "value is undefined" : u.undefined_hint());
}

Value binary_op(Renderer& r, BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool floats = numbers && (a.is_float() || b.is_float());
  switch (op) {
    case BinOp::Add:
      if (numbers) {
        if (floats) return Value(a.as_float() + b.as_float());
        int64_t out;
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &out)) overflow();
        return Value(out);
      }
      if (a.is_string() && b.is_string()) {
        r.check_size(a.as_string().size() + b.as_string().size());
        r.step(a.as_string().size() / 64);
        // Markup + str escapes the str (and str + Markup likewise): markupsafe semantics.
        if (a.is_markup() && !b.is_markup())
          return Value::markup(a.as_string() + html_escape(b.as_string()));
        if (!a.is_markup() && b.is_markup())
          return Value::markup(html_escape(a.as_string()) + b.as_string());
        if (a.is_markup()) return Value::markup(a.as_string() + b.as_string());
        return Value(a.as_string() + b.as_string());
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        std::vector<Value> out = a.as_list().items;
        out.insert(out.end(), b.as_list().items.begin(), b.as_list().items.end());
        r.step(out.size());
        return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
      unsupported(op, a, b);
    case BinOp::Sub:
      if (!numbers) unsupported(op, a, b);
      if (floats) return Value(a.as_float() - b.as_float());
      {
        int64_t out;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &out)) overflow();
        return Value(out);
      }
    case BinOp::Mul:
      if (numbers) {
        if (floats) return Value(a.as_float() * b.as_float());
        int64_t out;
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &out)) overflow();
        return Value(out);
      }
      if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
        return repeat(r, a, b.as_int());
      if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
        return repeat(r, b, a.as_int());
      unsupported(op, a, b);
    case BinOp::Div:
      if (!numbers) unsupported(op, a, b);
      if (b.as_float() == 0) fail("division by zero");
      return Value(a.as_float() / b.as_float());
    case BinOp::FloorDiv:
      if (!numbers) unsupported(op, a, b);
      if (floats) {
        if (b.as_float() == 0) fail("float floor division by zero");
        return Value(std::floor(a.as_float() / b.as_float()));
      } else {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value(q);
      }
    case BinOp::Mod:
      if (a.is_string()) {
        std::string out = py_percent_format(a.as_string(), b, r.options().max_output_bytes);
        r.check_size(out.size());
        return Value(std::move(out));
      }
      if (!numbers) unsupported(op, a, b);
      if (floats) {
        if (b.as_float() == 0) fail("float modulo");
        return Value(float_mod(a.as_float(), b.as_float()));
      } else {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (y == -1) return Value(int64_t{0});
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value(m);
      }
    case BinOp::Pow:
      if (!numbers) unsupported(op, a, b);
      if (!floats && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int(), out = 1;
        while (e > 0) {
          if (e & 1)
            if (__builtin_mul_overflow(out, base, &out)) overflow();
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
        }
        return Value(out);
      }
      if (a.as_float() == 0 && b.as_float() < 0) fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_float(), b.as_float()));
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.is_float()) return Value(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value(-v.as_int());
  }
  fail("bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  fail("bad operand type for unary +: '" + type_name(v) + "'");
}

bool contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Kind::String:
      if (!needle.is_string())
        fail("'in <string>' requires string as left operand, not " + type_name(needle));
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Kind::List:
      for (const auto& item : haystack.as_list().items)
        if (py_equal(item, needle)) return true;
      return false;
    case Kind::Dict:
      if (!is_hashable(needle)) fail("unhashable type: '" + type_name(needle) + "'");
      return haystack.as_dict().find(needle) != nullptr;
    case Kind::Undefined:
      return false;
    case Kind::Object:
      if (haystack.as_object()->iterable()) {
        for (const auto& item : haystack.as_object()->iterate())
          if (py_equal(item, needle)) return true;
        return false;
      }
      break;
    default:
      break;
  }
  fail("argument of type '" + type_name(haystack) + "' is not iterable");
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq:
      return py_equal(a, b);
    case CmpOp::Ne:
      return !py_equal(a, b);
    case CmpOp::In:
      return contains(b, a);
    case CmpOp::NotIn:
      return !contains(b, a);
    default:
      break;
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  switch (op) {
    case CmpOp::Lt:
      return py_compare(a, b, "<") < 0;
    case CmpOp::Le:
      return py_compare(a, b, "<=") <= 0;
    case CmpOp::Gt:
      return py_compare(a, b, ">") > 0;
    case CmpOp::Ge:
      return py_compare(a, b, ">=") >= 0;
    default:
      return false;
  }
}

}  // namespace herd::chat
