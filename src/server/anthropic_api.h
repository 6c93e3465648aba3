// Anthropic's Messages API: POST /v1/messages (a whole message, or server-sent events with
// `event:` lines) and POST /v1/messages/count_tokens, over the same ChatRun and scheduler as
// OpenAI's endpoints (anthropic_request.h parses, anthropic_response.h writes the JSON).
#pragma once

#include <cstdint>

#include "server/anthropic_request.h"
#include "server/chat_run.h"
#include "server/serving.h"

namespace herd::server {

struct ServedModel;

// The request rendered for the model (checking the model's name): thinking given to
// templates that take enable_thinking, tool_use ids "toolu_<n>_...", a prefill ending the
// prompt. POST /api/verify renders a served request so too.
ChatRun prepare_anthropic(const ServedModel& m, AnthropicRequest& a, uint64_t n);

// POST /v1/messages
void anthropic_messages(const httplib::Request& req, httplib::Response& res, Serving& s);
// POST /v1/messages/count_tokens: {"input_tokens": n}, the prompt the request would run.
void anthropic_count_tokens(const httplib::Request& req, httplib::Response& res, Serving& s);
// Anthropic's error shape: {"type": "error", "error": {"type", "message"}}, Retry-After on
// 503.
void write_anthropic_error(httplib::Response& res, const ApiError& e);

}  // namespace herd::server
