// The JSON of Anthropic Messages API responses: a whole message, the server-sent events of a
// streamed one (message_start, content blocks with their deltas, message_delta,
// message_stop) and errors ({"type": "error", "error": {"type", "message"}}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_stream.h"
#include "server/output_parser.h"
#include "server/request.h"

namespace herd::server {

// What every event of one response repeats.
struct AnthropicHeader {
  std::string id;  // "msg_..."
  std::string model;
  int64_t input_tokens = 0;  // the prompt's tokens
};

// {"type": "error", "error": {"type", "message"}}
nlohmann::json anthropic_error(const ApiError& e);

// One server-sent event: "event: <type>\ndata: <json>\n\n" (invalid UTF-8 replaced).
std::string anthropic_event(const nlohmann::json& value);

// The stop string of `stops` the generation ended at: the one found earliest in the text of
// all the generated tokens (`generated`, stop strings included), or none.
std::optional<std::string> matched_stop(const std::string& generated,
                                        const std::vector<std::string>& stops);

// "tool_use" when the reply holds calls, "max_tokens", "stop_sequence" (stop set) or
// "end_turn".
std::string anthropic_stop_reason(const engine::Finish& finish, bool has_tool_calls,
                                  const std::optional<std::string>& stop);

// A tool call's arguments as its input object; text that is no JSON object stays a string.
nlohmann::json tool_input(const std::string& arguments);

// The whole message: thinking, text and tool_use blocks, in that order.
nlohmann::json anthropic_message(const AnthropicHeader& header, const ParsedDelta& reply,
                                 const engine::Finish& finish,
                                 const std::optional<std::string>& stop);

// The events of a streamed message, from what the output parser produces: each kind of
// output (thinking, text, a tool call) is a content block with its own index, opened when
// its first piece comes and stopped when another begins or the message ends.
class AnthropicEvents {
 public:
  explicit AnthropicEvents(AnthropicHeader header) : header_(std::move(header)) {}
  // message_start and a first ping.
  std::string start() const;
  // The blocks' events for one parsed piece of the reply (reasoning, then text, then calls).
  std::string push(const ParsedDelta& delta);
  // content_block_stop of the open block, message_delta and message_stop. `herd`: herd's
  // extension (response.h: herd_extension), the message_delta's "herd" when not null.
  std::string finish(const engine::Finish& finish, const std::optional<std::string>& stop,
                     const nlohmann::json& herd = nullptr);
  bool has_tool_calls() const { return n_calls_ > 0; }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  // Opens a block of `type` (stopping the open one) unless one of that type is open.
  void open(std::string& out, Block type, nlohmann::json start_block);
  void close(std::string& out);
  void delta(std::string& out, nlohmann::json delta) const;

  AnthropicHeader header_;
  Block open_ = Block::kNone;
  int index_ = -1;  // the open (or last) block's index
  int n_calls_ = 0;
};

}  // namespace herd::server
