// The global functions a chat template can call: Jinja2's range, dict, namespace, joiner,
// cycler, and transformers' raise_exception and strftime_now.
#pragma once

#include <optional>
#include <string_view>

#include "chat/value.h"

namespace herd::chat {

// nullopt when `name` is not a global.
std::optional<Value> make_global(std::string_view name);

}  // namespace herd::chat
