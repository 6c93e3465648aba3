#include "server/tool_call_grammar.h"

namespace herd::server {

std::shared_ptr<const JsonGrammar> forced_call_grammar(const OutputParserOptions& options,
                                                       const nlohmann::ordered_json& tools) {
  auto grammar = std::make_shared<JsonGrammar>();
  const std::string id = tool_call_id(options, 0);
  // What the prompt already holds when the model writes the name.
  const std::string unnamed = forced_call_prefix(options.tools, "", id);
  for (const auto& tool : tools) {
    const auto& function = tool["function"];
    const std::string name = function["name"].get<std::string>();
    if (!options.forced_name.empty() && name != options.forced_name) continue;
    int32_t arguments = grammar->any_object();
    if (function.contains("parameters") && function["parameters"].is_object()) {
      try {
        arguments = grammar->objects_of(grammar->add_schema(function["parameters"]));
      } catch (const SchemaError&) {
        // Outside the subset: the arguments are still held to be a JSON object.
      }
    }
    // Every opening with a name begins with the one without (the name's opening quote, or
    // the marker), so the rest of it is what the model writes before the arguments.
    const std::string named = forced_call_prefix(options.tools, name, id);
    grammar->add_start(options.forced_name.empty() ? named.substr(unnamed.size()) : "", arguments);
  }
  return grammar;
}

}  // namespace herd::server
