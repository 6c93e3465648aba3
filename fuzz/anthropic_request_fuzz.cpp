// libFuzzer target: arbitrary bytes as the body of an Anthropic Messages request and of a
// count_tokens request, and as a tool call's arguments and a generation's text for the
// response side. An ApiError 400 is the expected refusal; anything else -- a crash, a hang, a
// sanitizer report, another exception -- is a bug.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/anthropic_request.h"
#include "server/anthropic_response.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::server;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (const AnthropicEndpoint e :
       {AnthropicEndpoint::kMessages, AnthropicEndpoint::kCountTokens}) {
    try {
      const AnthropicRequest r = parse_anthropic_request(input, e);
      if (!r.chat.messages.is_array()) __builtin_trap();
      (void)arguments_as_objects(r.chat.messages);
    } catch (const ApiError& error) {
      if (error.status() != 400) __builtin_trap();
    }
  }
  const std::string text(input);
  (void)tool_input(text);
  (void)matched_stop(text, {"\n\n", "END", text.substr(0, 3)});
  ParsedDelta d;
  d.content = text;
  d.reasoning = text.substr(0, size / 2);
  d.tool_calls.push_back({"toolu_0", "f", text, 0});
  AnthropicEvents events({"msg_0", "m", 1});
  (void)events.start();
  (void)events.push(d);
  (void)anthropic_message({"msg_0", "m", 1}, d, {}, std::nullopt);
  return 0;
}
