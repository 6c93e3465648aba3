// The filter and test tables (Jinja2's built-ins plus transformers' tojson), looked up by
// name at parse time.
#pragma once

#include <string_view>

#include "chat/ast.h"

namespace herd::chat {

FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

}  // namespace herd::chat
