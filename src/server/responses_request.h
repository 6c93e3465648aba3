// OpenAI's Responses API (POST /v1/responses): its request body read into herd's ChatRequest.
// Its input is a list of items (messages, function calls and their outputs, reasoning of
// earlier turns) that become chat messages in OpenAI's chat shape, which the model's chat
// template renders as for /v1/chat/completions; its tools, tool_choice and text.format
// become the chat request's. Everything a client can get wrong is an ApiError (OpenAI's
// error shape) naming the field, as the Responses API names it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/request.h"

namespace herd::server {

struct ResponsesRequest {
  // The sampling, tools, tool_choice, response format and template kwargs (its messages are
  // set from the items by responses_messages()).
  ChatRequest chat;
  // The request's input as a list of items in the Responses shape (a string input is one
  // user message), checked.
  nlohmann::ordered_json input = nlohmann::ordered_json::array();
  std::string previous_response_id;  // empty: none
  bool store = true;
  // What the response object echoes.
  nlohmann::ordered_json instructions;                             // a string or null
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // the Responses shape
  nlohmann::ordered_json tool_choice = "auto";
  nlohmann::ordered_json text_format = {{"type", "text"}};
  nlohmann::ordered_json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  nlohmann::ordered_json user;               // a string or null
  nlohmann::ordered_json max_output_tokens;  // an integer or null
  double temperature = 1;
  double top_p = 1;
  bool parallel_tool_calls = true;
};

// Throws ApiError(400, ...) for malformed JSON, wrong types, out-of-range values, missing
// fields, and what herd does not serve (tools other than functions, non-text content,
// background responses), naming the field.
ResponsesRequest parse_responses_request(std::string_view body);

// The chat messages of a conversation: `instructions` (a string, or null) as a system message
// first, joined with the system and developer messages that open `items` (templates refuse a
// system message that is not the first); then `items` (checked input items, and output items
// of earlier responses): messages (a developer message is a system message), function calls
// (an assistant message's tool_calls; consecutive calls, and the message before them, are one
// assistant message), function call outputs (tool messages, named by their call), and
// reasoning (the next assistant message's reasoning_content, which templates write for
// earlier turns).
nlohmann::ordered_json responses_messages(const nlohmann::ordered_json& instructions,
                                          const nlohmann::ordered_json& items);

}  // namespace herd::server
