// The served request as POST /api/verify replays it (docs/network.md "Checks"): the client's
// body parsed by the codec of the API it was served through, into the same ChatRun the
// serving endpoint ran, so that a check scores the served tokens after the very prompt.
//
//   endpoint          the API             parsed by
//   "chat"            /v1/chat/completions  request.h (OpenAI's chat)
//   "completions"     /v1/completions       request.h (a plain prompt)
//   "messages"        /v1/messages          anthropic_request.h (thinking, a prefill)
//   "responses"       /v1/responses         responses_request.h (no previous_response_id:
//                                           another pod's stored response is not here)
//   "ollama_chat"     /api/chat             ollama_request.h
//   "ollama_generate" /api/generate         ollama_request.h (raw or templated)
#pragma once

#include <optional>
#include <string>

#include "server/chat_run.h"
#include "server/output_parser.h"

namespace herd::server {

struct ServedModel;

struct VerifyRun {
  ChatRun run;
  // The output parser whose message content the API's answer carries (chat-like APIs); none
  // for a plain prompt, whose answer is the decoded text.
  std::optional<OutputParserOptions> parser;
};

// Throws ApiError 400 for an unknown endpoint or a request its codec refuses, 404 for
// another model's request.
VerifyRun verify_run(const std::string& endpoint, const std::string& request, const ServedModel& m);

}  // namespace herd::server
