// Python's operators on template values: arithmetic with int/float promotion and Python's
// floor division and modulo, str/list concatenation and repetition, Markup escaping on +,
// "in", and Jinja2's Undefined raising when used as an operand.
#pragma once

#include "chat/ast.h"
#include "chat/value.h"

namespace herd::chat {

Value binary_op(Renderer& renderer, BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
// Python `needle in haystack`.
bool contains(const Value& haystack, const Value& needle);
// One comparison of a chain (a < b, a == b, a in b, ...).
bool compare(CmpOp op, const Value& a, const Value& b);
// Throws the error an Undefined raises when it is used as an operand.
[[noreturn]] void undefined_error(const Value& undefined);

}  // namespace herd::chat
