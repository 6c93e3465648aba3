// Parsing of Anthropic Messages API bodies (POST /v1/messages and /v1/messages/count_tokens)
// into the ChatRequest every chat endpoint renders (chat_run.h): system and content blocks
// become OpenAI-shaped messages (tool_use blocks an assistant's tool_calls, tool_result
// blocks "tool" messages, thinking blocks reasoning_content), tools and tool_choice OpenAI's,
// output_config.format a JSON reply grammar. Everything a client can get wrong is an
// ApiError(400) whose message names the field (anthropic_api.h writes it in Anthropic's shape).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/request.h"

namespace herd::server {

struct AnthropicRequest {
  ChatRequest chat;
  // thinking {"type": "enabled"} (true) or {"type": "disabled"} (false); absent: the
  // template's default. Given to templates that take enable_thinking.
  std::optional<bool> thinking;
  // The text of a final assistant message, which the reply continues (Anthropic's prefill):
  // it ends the prompt and is not repeated in the reply. Empty: none.
  std::string prefill;
};

// What the request is for: a generation (max_tokens required) or counting its tokens.
enum class AnthropicEndpoint { kMessages, kCountTokens };

// Throws ApiError(400, ...) naming the field for malformed JSON, wrong types, out-of-range
// values, missing required fields, and what herd does not run (images and documents, server
// tools).
AnthropicRequest parse_anthropic_request(std::string_view body, AnthropicEndpoint endpoint);

}  // namespace herd::server
