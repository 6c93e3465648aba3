// What the hub reads in a pod's answer as it passes it to the client: the usage it charges
// (OpenAI's "usage") and the tokens it may have checked (herd's "herd":
// {"completion_token_ids": [...]}, which the hub asks for and takes out before the client
// sees the answer). A whole JSON answer is read at once; a streamed one (server-sent events)
// chunk by chunk as it arrives, split anywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace herd::hub {

struct AnswerFacts {
  std::optional<int64_t> prompt_tokens, completion_tokens;  // from "usage"
  std::vector<int32_t> token_ids;                           // from "herd"
  bool finished = false;                                    // a finish_reason was seen
  // The first choice's text as the client gets it: a chat message's content (or the deltas'
  // contents, in order), a completion's text. What a check compares with the ids' text.
  std::string text;
};

// A whole (non-streamed) answer: returns it without herd's extension and fills `facts`.
// A body that is not a JSON object is returned as it is.
std::string read_answer(const std::string& body, AnswerFacts& facts);

class StreamReader {
 public:
  // keep_usage: whether the client asked for the usage chunk (the hub always asks the pod).
  explicit StreamReader(bool keep_usage) : keep_usage_(keep_usage) {}
  // Takes bytes as they come; returns what to send the client now (whole events only).
  std::string feed(std::string_view bytes);
  // Whatever is left at the end (an event not ended by a blank line), as it came.
  std::string flush();
  const AnswerFacts& facts() const { return facts_; }

 private:
  std::string event(std::string_view text);

  bool keep_usage_;
  std::string pending_;
  AnswerFacts facts_;
};

}  // namespace herd::hub
