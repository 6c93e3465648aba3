// libFuzzer target: what pods send the hub, read as hostile bytes (hub/answer_reader.h,
// hub/checks.h): a whole answer, the same bytes as a stream cut at a point the input picks
// (in the API the input picks: OpenAI's, Anthropic's, the Responses API's or Ollama's
// NDJSON), and a checker's answer judged. Reading never crashes; a stream gives the same
// bytes to the client and the same facts however it is cut; judge() returns or throws
// herd::Error.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hub/answer_reader.h"
#include "hub/checks.h"
#include "util/error.h"

namespace {

std::string read_stream(std::string_view bytes, size_t cut, bool keep_usage, size_t max_ids,
                        herd::hub::AnswerFormat format, herd::hub::AnswerFacts& facts) {
  herd::hub::StreamReader reader(keep_usage, max_ids, format);
  std::string out = reader.feed(bytes.substr(0, cut));
  out += reader.feed(bytes.substr(cut));
  out += reader.flush();
  facts = reader.facts();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::hub;
  if (size < 1) return 0;
  const bool keep_usage = data[0] & 1;
  const size_t max_ids = (data[0] >> 1) & 7;  // the answer's most tokens: ids past it counted
  const auto format = static_cast<AnswerFormat>((data[0] >> 4) & 3);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  AnswerFacts whole;
  read_answer(std::string(text), whole, max_ids, format);

  const size_t cut = text.empty() ? 0 : data[0] % (text.size() + 1);
  AnswerFacts a, b;
  const std::string once = read_stream(text, text.size(), keep_usage, max_ids, format, a);
  const std::string split = read_stream(text, cut, keep_usage, max_ids, format, b);
  if (once != split || a.token_ids != b.token_ids || a.prompt_tokens != b.prompt_tokens ||
      a.completion_tokens != b.completion_tokens || a.finished != b.finished ||
      a.ids_given != b.ids_given || a.text != b.text) {
    std::abort();  // the cut changed what the client gets or what the hub charges
  }
  if (a.token_ids.size() > max_ids + 1 || a.ids_given < static_cast<int64_t>(a.token_ids.size())) {
    std::abort();  // a reader keeps one id past the answer's most, and counts them all
  }

  const nlohmann::json answer = nlohmann::json::parse(text, nullptr, false);
  if (!answer.is_discarded()) {
    try {
      const Verdict v = judge(
          answer,
          answer.contains("scores") && answer["scores"].is_array() ? answer["scores"].size() : 0,
          CheckThresholds{});
      if (v.implausible > v.tokens && v.tokens > 0) std::abort();
    } catch (const herd::Error&) {
    } catch (const nlohmann::json::exception&) {
      std::abort();  // judge must read every field with care
    }
  }
  return 0;
}
