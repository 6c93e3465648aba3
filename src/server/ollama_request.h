// Parsing and validation of Ollama's request bodies (POST /api/chat and /api/generate) into
// the requests herd's other APIs use: a ChatRequest whose messages are in OpenAI's shape (so
// that prepare_chat renders them through the model's template), or a raw prompt. Everything
// a client can get wrong is an ApiError with status 400 naming the field; ollama_api writes
// it in Ollama's shape, {"error": "..."}.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/request.h"

namespace herd::server {

// POST /api/chat.
struct OllamaChatRequest {
  // messages (OpenAI's shape: tool_calls with ids, tool results with tool_call_id, earlier
  // thinking as reasoning_content), tools, format as response_format, options as sampling,
  // think as template_kwargs. sampling.stream is Ollama's default, true.
  ChatRequest chat;
  // No messages: Ollama's way of loading a model. Answered at once, done_reason "load".
  bool load_only = false;
};

// POST /api/generate.
struct OllamaGenerateRequest {
  SamplingRequest sampling;
  std::string prompt;
  std::string system;
  // The prompt as is (the model's BOS before it), not rendered through the chat template.
  bool raw = false;
  ResponseFormat format;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // think
  // An empty prompt: Ollama's way of loading a model. Answered at once, done_reason "load".
  bool load_only = false;
};

// Ollama's defaults where a request's options do not say (Ollama's api/types.go): temperature
// 0.8, top_k 40, top_p 0.9, min_p 0, repeat_penalty 1.1 over the last 64 tokens.
engine::SamplerParams ollama_default_sampler();

// Throw ApiError(400, ...) naming the field for malformed JSON, wrong types, out-of-range
// values, missing fields and what herd does not do (images, a custom template, a suffix).
OllamaChatRequest parse_ollama_chat(std::string_view body);
OllamaGenerateRequest parse_ollama_generate(std::string_view body);

// Ollama's clients name models "name:tag"; the served model answers to its id and to
// "id:latest". Throws ApiError 404 ("model 'x' not found") for another name.
void check_ollama_model(const std::string& requested, const std::string& served);

}  // namespace herd::server
