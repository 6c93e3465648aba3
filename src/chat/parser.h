// Parser: tokens -> Program, following Jinja2's grammar (operator precedence, tuples,
// filters and tests, slices, call arguments) and its compile-time checks: unknown filters
// and tests are errors unless they sit inside an {% if %} or a conditional expression, where
// Jinja2 defers the error until they are evaluated.
#pragma once

#include <string_view>

#include "chat/ast.h"

namespace herd::chat {

// Throws RenderError (with a line) on syntax errors.
Program parse_program(std::string_view source);

}  // namespace herd::chat
