// The client APIs the hub routes (docs/network.md "Routing"), each a row: the path a client
// posts to, the name POST /api/verify knows its requests by (server/verify_request.h), the
// reader of its answers (answer_reader.h), how it streams, where its request says its most
// tokens, and the shape of its errors. Everything else (auth, rate limit, credits, the
// router, retries, byte caps, billing, checks) is the same for every row.
//
//   path                   endpoint          answers    streams            max tokens
//   /v1/chat/completions   chat              OpenAI     SSE, stream: true  max_tokens,
//   /v1/completions        completions       OpenAI     SSE, stream: true  max_completion_tokens
//   /v1/messages           messages          Anthropic  SSE, stream: true  max_tokens
//   /v1/responses          responses         Responses  SSE, stream: true  max_output_tokens
//   /api/chat              ollama_chat       Ollama     NDJSON, unless     options.num_predict
//   /api/generate          ollama_generate   Ollama       stream: false
//
// Errors: OpenAI's {"error": {"message", "type"}} (the Responses API's too), Anthropic's
// {"type": "error", "error": {"type", "message"}}, Ollama's {"error": "message"}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hub/answer_reader.h"

namespace herd::hub {

struct ClientApi {
  const char* path;
  const char* endpoint;  // what /api/verify calls it
  AnswerFormat format;
  bool streams_by_default;  // Ollama's
};

// The APIs the hub routes, in the table's order.
const std::vector<ClientApi>& client_apis();
// The row for `path`; nullptr for a path the hub does not route.
const ClientApi* client_api(std::string_view path);

// Whether the request asks for a streamed answer.
bool wants_stream(const ClientApi& api, const nlohmann::json& body);
// The request's most answer tokens (at least 1), or -1 when it does not say.
int64_t max_tokens_given(const ClientApi& api, const nlohmann::json& body);
// Why the hub refuses a request that it could not serve faithfully ("" when none): a
// Responses request continuing a stored response (previous_response_id), which only the
// pod that made that response holds.
std::string refusal(const ClientApi& api, const nlohmann::json& body);

// An error body in the API's shape; `type` is OpenAI's ("invalid_request_error",
// "server_error", ...), mapped from `status` for Anthropic's.
nlohmann::json error_body(const ClientApi& api, int status, const std::string& type,
                          const std::string& message);
// A streamed answer's content type: "text/event-stream", Ollama's "application/x-ndjson".
const char* stream_content_type(const ClientApi& api);
// What ends a stream that no pod answered: an error event (then OpenAI's "[DONE]"), or
// Ollama's error line.
std::string stream_error(const ClientApi& api, const std::string& message);

}  // namespace herd::hub
