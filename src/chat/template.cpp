#include "chat/template.h"

#include "chat/ast.h"
#include "chat/parser.h"
#include "chat/renderer.h"

namespace herd::chat {
namespace {

std::string located(const RenderError& e, int fallback_line) {
  const int line = e.line() ? e.line() : fallback_line;
  return (line > 0 ? "line " + std::to_string(line) + ": " : std::string()) + e.what();
}

}  // namespace

Template Template::parse(std::string source) {
  Template t;
  try {
    t.program_ = std::make_shared<const Program>(parse_program(source));
  } catch (const RenderError& e) {
    throw herd::Error("chat", located(e, 0));
  }
  return t;
}

std::string Template::render(const nlohmann::ordered_json& variables,
                             const RenderOptions& options) const {
  HERD_CHECK(program_ != nullptr);
  Renderer renderer(*program_, options);
  try {
    return renderer.render(variables);
  } catch (const RenderError& e) {
    throw herd::Error("chat", located(e, renderer.line()));
  }
}

nlohmann::ordered_json chat_variables(const nlohmann::ordered_json& messages,
                                      const nlohmann::ordered_json* tools,
                                      bool add_generation_prompt,
                                      const std::optional<std::string>& bos,
                                      const std::optional<std::string>& eos,
                                      const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  v["messages"] = messages;
  v["tools"] = tools ? *tools : nlohmann::ordered_json(nullptr);
  v["documents"] = nullptr;
  v["add_generation_prompt"] = add_generation_prompt;
  if (bos) v["bos_token"] = *bos;
  if (eos) v["eos_token"] = *eos;
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) v[it.key()] = it.value();
  } else if (!extra.is_null()) {
    throw herd::Error("chat", "extra template variables must be a JSON object");
  }
  return v;
}

}  // namespace herd::chat
