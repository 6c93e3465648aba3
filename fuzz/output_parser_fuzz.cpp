// libFuzzer target: arbitrary bytes as model output for OutputParser, in every format (the
// first byte picks the format and options, the second how the text is cut into pieces), with
// the parameter types of a fixed set of tools.
// Anything but a clean return -- a crash, a hang, a sanitizer report, an exception -- is a
// bug. The reply must also read the same whole and in pieces, since a stream and a
// non-streamed reply are the same reply; and a forced call is always there.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/argument_types.h"
#include "server/output_parser.h"

namespace {

using herd::server::OutputParser;
using herd::server::OutputParserOptions;
using herd::server::ParsedDelta;
using herd::server::ToolFormat;

constexpr ToolFormat kFormats[] = {
    ToolFormat::kNone,         ToolFormat::kHermes,      ToolFormat::kLlama3Json,
    ToolFormat::kMistral,      ToolFormat::kMistralArgs, ToolFormat::kMistralCallId,
    ToolFormat::kDeepSeek,     ToolFormat::kKimi,        ToolFormat::kHarmony,
    ToolFormat::kDeepSeekDsml, ToolFormat::kDeepSeekR1,  ToolFormat::kDeepSeekV4,
    ToolFormat::kQwenXml,      ToolFormat::kGlm,         ToolFormat::kGemma,
};

// The tools of every input: their parameters' types type the values of the formats that
// write them as text (a parameter not listed is typed by its text alone).
const std::shared_ptr<const herd::server::ParameterTypes> kTypes =
    herd::server::parameter_types(nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "f", "parameters": {"properties": {
    "s": {"type": "string"}, "n": {"type": "integer"}, "b": {"type": "boolean"},
    "o": {"type": "object"}, "a": {"type": ["array", "null"]}, "e": {"enum": ["x", 1]}}}}},
  {"type": "function", "function": {"name": "get_weather"}}])"));

ParsedDelta parse(const OutputParserOptions& o, std::string_view text, uint8_t cut) {
  OutputParser parser(o);
  ParsedDelta all;
  if (cut == 0) {
    all.append(parser.push(text));
  } else {
    // Pieces of 1 to 8 bytes, as tokens arrive.
    uint32_t state = cut;
    for (size_t at = 0; at < text.size();) {
      state = state * 1103515245u + 12345u;
      const size_t n = std::min<size_t>(text.size() - at, 1 + (state >> 16) % 8);
      all.append(parser.push(text.substr(at, n)));
      at += n;
    }
  }
  all.append(parser.finish());
  return all;
}

bool same(const ParsedDelta& a, const ParsedDelta& b) {
  if (a.content != b.content || a.reasoning != b.reasoning) return false;
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const auto &x = a.tool_calls[i], &y = b.tool_calls[i];
    if (x.index != y.index || x.id != y.id || x.name != y.name || x.arguments != y.arguments) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0];
  const uint8_t cut = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  OutputParserOptions o;
  o.tools = kFormats[flags % std::size(kFormats)];
  o.harmony = o.tools == ToolFormat::kHarmony || (o.tools == ToolFormat::kNone && flags & 0x80);
  o.reasoning = flags & 0x10;
  o.starts_in_reasoning = flags & 0x20;
  o.forced_call = flags & 0x40 && herd::server::can_force_calls(o.tools);
  o.forced_name = flags & 0x80 ? "f" : "";
  o.tool_names = {"f", "get_weather"};
  o.parameter_types = kTypes;
  if (o.tools == ToolFormat::kGemma) {
    o.reasoning_markers = *herd::server::reasoning_markers("<|channel>thought");
  }
  const ParsedDelta whole = parse(o, text, 0);
  const ParsedDelta pieces = parse(o, text, cut | 1);
  if (o.forced_call && (whole.tool_calls.empty() || pieces.tool_calls.empty())) __builtin_trap();
  if (!same(whole, pieces)) __builtin_trap();
  return 0;
}
