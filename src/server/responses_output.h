// The JSON that POST /v1/responses answers with: the output items that a reply's parsed pieces
// (ParsedDelta: reasoning, content, tool calls) make, the stream events that announce them as
// they come, and the response object. A streamed reply and a whole one are built by the same
// ResponseOutput, so that the events add up to the whole reply's items.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_stream.h"
#include "server/output_parser.h"

namespace herd::server {

struct ResponsesRequest;

// Output items, in the order the reply produced them: a reasoning item for reasoning
// ({type: "reasoning", summary: [], content: [{type: "reasoning_text", text}]}), a message for
// text ({type: "message", role: "assistant", content: [{type: "output_text", text,
// annotations: []}]}), a function_call for each call ({call_id, name, arguments}). Within one
// ParsedDelta reasoning goes first, then text, then calls. Text that is only whitespace does
// not open a message (it lies between other items); a reply with no item at all gets an
// empty message.
class ResponseOutput {
 public:
  // suffix: what item ids end with (ids are "rs_", "msg_" or "fc_" + suffix + "_" + index).
  explicit ResponseOutput(std::string suffix);

  // Adds what the parser produced, appending the events that announce it to `events`
  // (response.output_item.added, response.content_part.added, response.output_text.delta,
  // response.reasoning_text.delta, response.function_call_arguments.delta, and the .done
  // events of an item that a new one follows), each without its sequence_number.
  void add(const ParsedDelta& delta, std::vector<nlohmann::ordered_json>& events);
  // Ends the output: the open item is done, with status "incomplete" when `incomplete`.
  void finish(bool incomplete, std::vector<nlohmann::ordered_json>& events);

  // The items done so far (all of them after finish()).
  const nlohmann::ordered_json& items() const { return items_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  void open(Open kind, std::vector<nlohmann::ordered_json>& events, const ToolCall* call);
  void close(const char* status, std::vector<nlohmann::ordered_json>& events);
  std::string next_id(const char* prefix);

  std::string suffix_;
  nlohmann::ordered_json items_ = nlohmann::ordered_json::array();
  Open open_ = Open::kNone;
  nlohmann::ordered_json item_;  // the open item (in progress)
  std::string text_;             // its text (reasoning, message) or arguments (call)
  std::string held_space_;       // whitespace not yet in a message
  int call_index_ = -1;          // the parser's index of the open call
  int n_ids_ = 0;
};

// "completed" (kStop), "incomplete" (kLength: max_output_tokens or the context), "cancelled"
// (the client went away) or "failed" (kError).
std::string response_status(const engine::Finish& finish);

// {input_tokens, input_tokens_details: {cached_tokens}, output_tokens, output_tokens_details:
// {reasoning_tokens}, total_tokens}. Reasoning tokens are not counted apart (0).
nlohmann::ordered_json responses_usage(const engine::Finish& finish);

// The response object: its id, status and output, and the request's settings echoed as
// OpenAI's are. `finish` null: in progress (no usage yet).
nlohmann::ordered_json response_object(const ResponsesRequest& r, const std::string& id,
                                       int64_t created_at, const std::string& model,
                                       const nlohmann::ordered_json& output,
                                       const engine::Finish* finish);

// One server-sent event of the Responses API: "event: <type>\ndata: <json>\n\n" (invalid
// UTF-8 replaced).
std::string responses_sse(const nlohmann::ordered_json& event);

}  // namespace herd::server
