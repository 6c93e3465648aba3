// The grammar of a forced tool call (tool_choice "required" or a named function): what the
// model writes after the opening forced_call_prefix() put at the end of the prompt. With a
// named function that is its arguments; with "required", one listed name followed by the
// rest of its opening in the template's format and then that function's arguments. The
// arguments are held to the function's `parameters` schema when it is within the subset
// JsonGrammar supports, else to any JSON object. The reply ends with the arguments: the
// forced call is the whole reply.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/json_schema.h"
#include "server/output_parser.h"

namespace herd::server {

// tools: the request's tools (an array of {"type": "function", "function": {...}}).
// REQUIRES: options.forced_call, grammar_holds_arguments(options.tools), and a named function is in
// tools.
std::shared_ptr<const JsonGrammar> forced_call_grammar(const OutputParserOptions& options,
                                                       const nlohmann::ordered_json& tools);

}  // namespace herd::server
