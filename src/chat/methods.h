// Python methods on str, dict and list values ("a,b".split(","), d.items(), l.index(x)),
// as far as Jinja2's ImmutableSandboxedEnvironment allows them: methods that would mutate
// a list or dict exist but raise a SecurityError when called.
#pragma once

#include <string_view>

#include "chat/value.h"

namespace herd::chat {

enum class MethodKind { Missing, Safe, Unsafe };

MethodKind find_method(const Value& receiver, std::string_view name);
// REQUIRES: find_method(receiver, name) != Missing.
Value call_method(Renderer& renderer, const Value& receiver, std::string_view name, CallArgs& args);

}  // namespace herd::chat
