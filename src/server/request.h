// Parsing and validation of OpenAI API request bodies (/v1/chat/completions and
// /v1/completions). Everything a client can get wrong becomes an ApiError with the HTTP
// status and OpenAI's error shape, naming the offending field.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"
#include "engine/speculative.h"
#include "server/json_schema.h"
#include "util/error.h"

namespace herd::server {

// An error the client caused (or that the client must hear about), in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = {}, std::string code = {});
  int status() const { return status_; }
  const std::string& message() const { return message_; }
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string message_, type_, param_, code_;
};

// What both endpoints share: sampling and stopping.
struct SamplingRequest {
  std::string model;  // empty: whatever is served
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int64_t max_tokens = -1;     // < 0: until the context is full
  engine::SamplerParams sampler;
  std::vector<std::string> stop;
  int top_logprobs = -1;    // < 0: no logprobs
  bool ignore_eos = false;  // generate max_tokens whatever the model says (benchmarks)
  // herd's extension for a hub (docs/network.md): the answer also carries the ids of the
  // tokens generated, as "herd": {"completion_token_ids": [...]}, so that the hub can have
  // them checked by another pod (POST /api/verify).
  bool herd_token_ids = false;
  // herd's extension: "speculative": {"lookup": K, "ngram_min": a, "ngram_max": b, "draft": D,
  // "mtp": M} (K, D, M <= 16, 1 <= a <= b <= 8; D: tokens of the server's draft model, M: of
  // the model's MTP head where the server loaded it), or false (none); absent: the server's
  // default.
  std::optional<engine::SpeculativeParams> speculative;
};

// OpenAI's tool_choice: "auto", "none", "required" or {"type": "function", "function":
// {"name": ...}} (kFunction, the name in `function`).
struct ToolChoice {
  enum class Kind { kAuto, kNone, kRequired, kFunction };
  Kind kind = Kind::kAuto;
  std::string function;
  // Whether the reply must be a tool call (required, or a named function).
  bool forces_call() const { return kind == Kind::kRequired || kind == Kind::kFunction; }
};

// OpenAI's response_format: "text", "json_object" (the reply is one JSON object) or
// "json_schema" (the reply is JSON matching json_schema.schema, within JsonGrammar's subset).
struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = Kind::kText;
  std::string name;  // json_schema.name
  bool strict = false;
  // The reply's grammar (null for text), compiled while the request is read so that an
  // unsupported schema is a 400 naming its keyword.
  std::shared_ptr<const JsonGrammar> grammar;
};

struct ChatRequest {
  SamplingRequest sampling;
  nlohmann::ordered_json messages;  // array of objects with a string "role"
  nlohmann::ordered_json tools;     // array, or null
  ToolChoice tool_choice;           // a forced call has tools; a named one is among them
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  ResponseFormat response_format;
};

struct CompletionRequest {
  SamplingRequest sampling;
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_tokens;  // when the prompt is given as token ids
  ResponseFormat response_format;      // as in chat (llama.cpp's server takes it here too)
};

// The defaults a request starts from: OpenAI's temperature 1 and top_p 1, no top-k/min-p
// unless asked, so that an unconfigured client samples the model's own distribution.
engine::SamplerParams default_sampler();

// The function names of a request's tools (an array of tool objects, or null), in order.
std::vector<std::string> tool_names(const nlohmann::ordered_json& tools);

// `messages` with the arguments of every assistant tool call that a client sent as a string
// holding a JSON object (as OpenAI's API has them) given as that object. Templates write a
// call's arguments with `tojson` (DeepSeek V3.1, Kimi K2, gpt-oss, Llama 3.1, Qwen 2.5, ...),
// which would write the string quoted instead of the object the model was trained to see;
// the templates that take both write an object with tojson too. Anything else is unchanged.
nlohmann::ordered_json arguments_as_objects(const nlohmann::ordered_json& messages);

// `messages` with every null (or absent) content of an assistant message given as "".
nlohmann::ordered_json null_content_as_empty(const nlohmann::ordered_json& messages);

// The sampling and stopping fields of an OpenAI-shaped body (model, stream, max_tokens,
// temperature, top_p, seed, stop, ...), which other APIs' codecs reuse for the fields they
// share. Throws ApiError(400, ...) naming the field.
SamplingRequest parse_sampling(const nlohmann::ordered_json& body);

// Throw ApiError(400, ...) naming the field for malformed JSON, wrong types, out-of-range
// values or missing required fields.
ChatRequest parse_chat_request(std::string_view body);
CompletionRequest parse_completion_request(std::string_view body);

}  // namespace herd::server
