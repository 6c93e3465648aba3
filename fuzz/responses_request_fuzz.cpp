// libFuzzer target: arbitrary bytes as the body of a Responses API request (POST
// /v1/responses), its items made chat messages, and as a reply's pieces made output items and
// stream events. An ApiError (a 400 naming the field) is the expected refusal; anything else --
// a crash, a hang, a sanitizer report, another exception -- is a bug.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/responses_output.h"
#include "server/responses_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  herd::server::ResponsesRequest r;
  try {
    r = herd::server::parse_responses_request(input);
  } catch (const herd::server::ApiError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  // A checked request's items always make messages.
  const nlohmann::ordered_json messages = herd::server::responses_messages(r.instructions, r.input);
  if (!r.input.empty() && messages.empty() && r.instructions.is_null()) {
    // Items of reasoning alone make no message; anything else makes one.
    for (const auto& item : r.input) {
      if (item.value("type", "") != "reasoning") __builtin_trap();
    }
  }
  // The bytes as a reply's pieces: text, reasoning and calls in turn, split at every fourth.
  herd::server::ResponseOutput output("f");
  std::vector<nlohmann::ordered_json> events;
  for (size_t i = 0; i < size; i += 4) {
    const std::string piece(input.substr(i, 4));
    herd::server::ParsedDelta d;
    switch (data[i] % 3) {
      case 0:
        d.content = piece;
        break;
      case 1:
        d.reasoning = piece;
        break;
      default:
        d.tool_calls.push_back({"call_" + std::to_string(data[i] % 5), "f", piece, data[i] % 5});
    }
    output.add(d, events);
  }
  output.finish(size % 2 == 1, events);
  if (output.items().empty()) __builtin_trap();
  for (const auto& e : events) herd::server::responses_sse(e);
  herd::engine::Finish finish;
  herd::server::responses_sse(
      herd::server::response_object(r, "resp_f", 0, "m", output.items(), &finish));
  return 0;
}
