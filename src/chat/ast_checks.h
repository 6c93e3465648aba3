// Analyses of a parsed template that Jinja2 performs at compile time: which special names a
// macro uses (deciding whether it accepts a caller, extra positional or keyword arguments),
// and unknown filters/tests, which are errors unless inside {% if %} or a conditional
// expression, where Jinja2 defers the error to the moment they are evaluated.
#pragma once

#include "chat/ast.h"

namespace herd::chat {

// Sets macro.uses_caller / uses_varargs / uses_kwargs from the names its body mentions
// (not counting nested macros).
void find_special_names(MacroDef& macro);

// Throws RenderError (with the line) for an unknown filter or test outside a soft context.
void check_unknown_filters_and_tests(const Body& body);

}  // namespace herd::chat
