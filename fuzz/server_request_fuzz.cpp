// libFuzzer target: arbitrary bytes as the body of a chat and a completion request (its
// response_format schema compiled), as model output for the reasoning/tool-call parser in
// every format, harmony's included (fed in two pieces, then finished), and as a reply fed to the
// JSON constraint of the request's schema, or of any object. An ApiError (a 400 naming the field)
// is the expected refusal; anything else -- a crash, a hang, a sanitizer report, another exception
// -- is a bug.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/json_constraint.h"
#include "server/output_parser.h"
#include "server/request.h"
#include "server/response.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const herd::server::JsonGrammar> grammar;
  try {
    grammar = herd::server::parse_chat_request(input).response_format.grammar;
  } catch (const herd::server::ApiError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  if (!grammar) {
    auto any = std::make_shared<herd::server::JsonGrammar>();
    any->add_start("", any->any_object());
    grammar = any;
  }
  herd::server::JsonConstraint constraint(*grammar);
  for (char c : input) {
    if (!constraint.push(static_cast<unsigned char>(c))) break;
    // A whole reply takes nothing more.
    if (constraint.complete() && constraint.push(std::string_view(" "))) __builtin_trap();
  }
  try {
    herd::server::parse_completion_request(input);
  } catch (const herd::server::ApiError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  using herd::server::ToolFormat;
  for (ToolFormat format :
       {ToolFormat::kNone, ToolFormat::kHermes, ToolFormat::kLlama3Json, ToolFormat::kMistral,
        ToolFormat::kMistralArgs, ToolFormat::kMistralCallId, ToolFormat::kDeepSeek,
        ToolFormat::kKimi, ToolFormat::kHarmony, ToolFormat::kDeepSeekDsml,
        ToolFormat::kDeepSeekR1}) {
    for (bool forced : {false, true}) {
      herd::server::OutputParserOptions options;
      // Harmony replies come without tools too (a gpt-oss template, no tools in the request).
      options.harmony = format == ToolFormat::kHarmony || (format == ToolFormat::kNone && forced);
      options.reasoning = true;
      options.starts_in_reasoning = size % 2 == 1;
      options.tools = format;
      options.forced_call = forced;
      options.forced_name = size % 3 == 0 ? "f" : "";
      options.tool_names = {"f", "g"};
      herd::server::OutputParser parser(options);
      herd::server::ParsedDelta all = parser.push(input.substr(0, size / 2));
      all.append(parser.push(input.substr(size / 2)));
      all.append(parser.finish());
      // A forced call is always there.
      if (forced && herd::server::can_force_calls(format) && all.tool_calls.empty()) {
        __builtin_trap();
      }
      // Whatever the text, the response JSON is written without throwing.
      herd::server::sse_event(herd::server::chat_delta(all));
    }
  }
  return 0;
}
