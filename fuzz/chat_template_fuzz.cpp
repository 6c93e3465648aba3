// libFuzzer target: arbitrary bytes are parsed as a chat template and rendered with a small
// fixed conversation (system/user/assistant with a tool call/tool result, a tool list,
// BOS/EOS, a fixed clock). Parse and render errors (herd::Error, including a template's
// raise_exception) are expected; anything else -- a crash, a hang, a sanitizer report,
// another exception type -- is a bug. Tight step and output limits keep each run short.
#include <cstdint>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "util/error.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json kContext = [] {
    const auto messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in São Paulo? <&> \"quoted\""},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "São Paulo", "days": 3}}}]},
      {"role": "tool", "tool_call_id": "call1", "name": "get_weather", "content": "{\"t\": 21.5}"},
      {"role": "assistant", "content": "<think>hm</think>It is 21.5 °C.", "reasoning_content": "ok"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks 日本"}]}
    ])");
    const auto tools = nlohmann::ordered_json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
        "days": {"type": "integer", "enum": [1, 3]}}, "required": ["city"]}}}
    ])");
    const auto extra = nlohmann::ordered_json::parse(R"({"enable_thinking": true, "n": 2.5})");
    return herd::chat::chat_variables(messages, &tools, true, std::string("<s>"),
                                      std::string("</s>"), extra);
  }();
  return kContext;
}

std::tm fixed_time() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mday = 15;
  tm.tm_hour = 12;
  tm.tm_wday = 4;
  tm.tm_yday = 14;
  return tm;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  herd::chat::RenderOptions options;
  options.now = fixed_time;
  options.max_steps = 200'000;
  options.max_output_bytes = size_t{1} << 20;
  try {
    const auto t = herd::chat::Template::parse(source);
    (void)t.render(context(), options);
  } catch (const herd::Error&) {
    // Malformed or failing templates are expected.
  }
  return 0;
}
