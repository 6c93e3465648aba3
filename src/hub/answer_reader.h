// What the hub reads in a pod's answer as it passes it to the client: the usage it charges
// and the tokens it may have checked (herd's "herd": {"completion_token_ids": [...]}, which
// the hub asks for and takes out before the client sees the answer). A whole JSON answer is
// read at once; a streamed one chunk by chunk as it arrives, split anywhere. Each API has
// its own reader (AnswerFormat):
//
//   API          usage (prompt, completion)          finished         text          stream
//   OpenAI       usage.prompt_tokens, .completion_   a finish_reason  choice 0's    SSE "data:"
//                tokens (a usage chunk in streams)                    content/text
//   Anthropic    usage.input_tokens (message_start   stop_reason      text blocks,  SSE, event:
//                in streams), usage.output_tokens    (message_delta)  text_delta    lines
//   Responses    usage.input_tokens, .output_tokens  status completed output_text,  SSE, event:
//                (response.completed's response)     or incomplete    its deltas    lines
//   Ollama       prompt_eval_count, eval_count       done: true       message.content NDJSON
//                                                                     or response
//
// "herd" is top-level in a whole answer and in the event that carries it (OpenAI's finish
// chunk, Anthropic's message_delta, Ollama's done line), and in the response object of the
// Responses API's final event.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace herd::hub {

struct AnswerFacts {
  std::optional<int64_t> prompt_tokens, completion_tokens;  // from "usage"
  // From "herd": at most the reader's max_ids + 1 are kept (one past the bound shows the
  // answer went past it); `ids_given` counts them all.
  std::vector<int32_t> token_ids;
  int64_t ids_given = 0;
  bool finished = false;  // a finish_reason was seen
  // The first choice's text as the client gets it: a chat message's content (or the deltas'
  // contents, in order), a completion's text. What a check compares with the ids' text.
  std::string text;
};

// Which API's answer a reader reads (the table above).
enum class AnswerFormat { kOpenAI, kAnthropic, kResponses, kOllama };

// What a reader keeps of an answer's ids by default: a model's context is never larger.
inline constexpr size_t kMaxTokenIds = size_t{1} << 20;

// A whole (non-streamed) answer: returns it without herd's extension and fills `facts`,
// keeping at most `max_ids` + 1 ids. A body that is not a JSON object is returned as it is.
std::string read_answer(const std::string& body, AnswerFacts& facts, size_t max_ids = kMaxTokenIds,
                        AnswerFormat format = AnswerFormat::kOpenAI);

class StreamReader {
 public:
  // keep_usage: whether the client asked for OpenAI's usage chunk (the hub always asks the
  // pod; other APIs' streams always carry their usage). max_ids: the answer's most tokens
  // (answer_limits.h); ids past one more are counted, not kept. What it holds otherwise is
  // bounded by the bytes fed (PodClients caps them).
  explicit StreamReader(bool keep_usage, size_t max_ids = kMaxTokenIds,
                        AnswerFormat format = AnswerFormat::kOpenAI)
      : keep_usage_(keep_usage), max_ids_(max_ids), format_(format) {}
  // Takes bytes as they come; returns what to send the client now (whole events, or for
  // Ollama whole lines, only).
  std::string feed(std::string_view bytes);
  // Whatever is left at the end (an event not ended by a blank line, a line by a newline),
  // as it came.
  std::string flush();
  const AnswerFacts& facts() const { return facts_; }

 private:
  std::string event(std::string_view text);
  std::string line(std::string_view text);

  bool keep_usage_;
  size_t max_ids_;
  AnswerFormat format_;
  std::string pending_;
  AnswerFacts facts_;
};

}  // namespace herd::hub
