// herd::chat::Template: Jinja2 chat templates rendered exactly as Hugging Face transformers'
// apply_chat_template does (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// loop controls; tojson = Python json.dumps(ensure_ascii=False); raise_exception;
// strftime_now). A parsed Template is immutable and may be rendered from several threads.
//
//   auto t = Template::parse(source);
//   std::string prompt = t.render(chat_variables(messages, &tools, true, bos, eos, {}));
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace herd::chat {

struct Program;

// A template called raise_exception(message). what() is "[chat] template raised: <message>";
// message() is the template's own text, exactly.
class TemplateRaised : public herd::Error {
 public:
  explicit TemplateRaised(std::string message)
      : herd::Error("chat", "template raised: " + message), message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

struct RenderOptions {
  // Local time for strftime_now(); empty: the system clock's local time.
  std::function<std::tm()> now;
  // Bounds that keep a hostile template from exhausting memory or time; exceeding one is
  // a herd::Error naming the limit.
  size_t max_output_bytes = size_t{64} << 20;  // also the largest string value
  uint64_t max_steps = 20'000'000;             // evaluation steps (nodes, iterations, calls); ~1 s
};

class Template {
 public:
  // Throws herd::Error("[chat] line N: ...") on syntax errors and unknown filters/tests.
  static Template parse(std::string source);

  // Renders with the given top-level variables (a JSON object; key order is kept).
  // Throws TemplateRaised for raise_exception() and herd::Error for other failures.
  std::string render(const nlohmann::ordered_json& variables,
                     const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

// The variables transformers passes to a chat template: messages, tools (None when absent),
// documents=None, add_generation_prompt, bos_token/eos_token (only when given), plus every
// key of `extra` (enable_thinking, ...). REQUIRES: extra is an object or null.
nlohmann::ordered_json chat_variables(const nlohmann::ordered_json& messages,
                                      const nlohmann::ordered_json* tools,
                                      bool add_generation_prompt,
                                      const std::optional<std::string>& bos,
                                      const std::optional<std::string>& eos,
                                      const nlohmann::ordered_json& extra);

}  // namespace herd::chat
