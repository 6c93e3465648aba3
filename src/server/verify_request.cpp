#include "server/verify_request.h"

#include "server/anthropic_api.h"
#include "server/ollama_api.h"
#include "server/ollama_request.h"
#include "server/request.h"
#include "server/responses_request.h"
#include "server/served_model.h"

namespace herd::server {

VerifyRun verify_run(const std::string& endpoint, const std::string& request,
                     const ServedModel& m) {
  VerifyRun v;
  if (endpoint == "chat") {
    ChatRequest r = parse_chat_request(request);
    check_model(r.sampling.model, m);
    v.run = prepare_chat(m, r, 0);
    v.parser = v.run.parser;
  } else if (endpoint == "completions") {
    CompletionRequest r = parse_completion_request(request);
    check_model(r.sampling.model, m);
    v.run = prepare_completion(m, r);
  } else if (endpoint == "messages") {
    AnthropicRequest r = parse_anthropic_request(request, AnthropicEndpoint::kMessages);
    v.run = prepare_anthropic(m, r, 0);
    v.parser = v.run.parser;
  } else if (endpoint == "responses") {
    ResponsesRequest r = parse_responses_request(request);
    check_model(r.chat.sampling.model, m);
    if (!r.previous_response_id.empty()) {
      throw ApiError(400,
                     "a request continuing a stored response (previous_response_id) cannot be "
                     "checked: the response is kept by the pod that made it",
                     "invalid_request_error", "previous_response_id");
    }
    r.chat.messages = responses_messages(r.instructions, r.input);
    if (r.chat.messages.empty()) {
      throw ApiError(400, "'input' holds no message", "invalid_request_error", "input");
    }
    v.run = prepare_chat(m, r.chat, 0);
    v.parser = v.run.parser;
  } else if (endpoint == "ollama_chat") {
    OllamaChatRequest r = parse_ollama_chat(request);
    check_ollama_model(r.chat.sampling.model, m.id);
    if (r.load_only) {
      throw ApiError(400, "a request that only loads the model has no tokens to check",
                     "invalid_request_error", "messages");
    }
    v.run = prepare_chat(m, r.chat, 0);
    v.parser = v.run.parser;
  } else if (endpoint == "ollama_generate") {
    OllamaGenerateRequest r = parse_ollama_generate(request);
    check_ollama_model(r.sampling.model, m.id);
    if (r.load_only) {
      throw ApiError(400, "a request that only loads the model has no tokens to check",
                     "invalid_request_error", "prompt");
    }
    const bool templated = !r.raw && m.chat_template;
    v.run = prepare_ollama_generate(m, r, 0);
    if (templated) v.parser = v.run.parser;
  } else {
    throw ApiError(400,
                   "'endpoint' must be \"chat\", \"completions\", \"messages\", \"responses\", "
                   "\"ollama_chat\" or \"ollama_generate\"",
                   "invalid_request_error", "endpoint");
  }
  return v;
}

}  // namespace herd::server
