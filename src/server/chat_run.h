// A request as the engine runs it, whatever API it came in: the prompt's tokens and sampling
// (engine::GenerationParams), the JSON grammar its reply is held to (none: free), and how a
// chat reply is read (reasoning, tool calls). Every API's chat endpoint renders its messages
// through the model's chat template here, so tools, forced calls and JSON replies work the
// same in all of them.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/scheduler.h"
#include "server/json_schema.h"
#include "server/output_parser.h"
#include "server/request.h"

namespace herd::server {

struct ServedModel;

struct ChatRun {
  engine::GenerationParams params;
  std::shared_ptr<const JsonGrammar> grammar;
  OutputParserOptions parser;
};

// Throws ApiError 404 ("model_not_found") when the request names another model than the one
// served (an empty name is whatever is served).
void check_model(const std::string& requested, const ServedModel& m);

// The engine's parameters for a request's sampling and stopping (no prompt yet).
engine::GenerationParams generation_params(const SamplingRequest& r);

// A chat request rendered with the model's template: the prompt, a forced tool call's
// opening and grammar, a JSON reply's grammar, the reply's parser. `n` numbers the response
// (tool-call ids). Throws ApiError 400 naming "messages" when the template refuses or fails,
// "tool_choice" when a call cannot be forced.
ChatRun prepare_chat(const ServedModel& m, const ChatRequest& r, uint64_t n);

// A text completion: the prompt's tokens (a text prompt gets the model's BOS).
ChatRun prepare_completion(const ServedModel& m, const CompletionRequest& r);

}  // namespace herd::server
