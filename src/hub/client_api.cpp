#include "hub/client_api.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "http/anthropic_errors.h"

namespace herd::hub {
namespace {

using json = nlohmann::json;

// A whole number of at least 1 (Ollama's options take 40.0 as 40), else -1.
int64_t positive_count(const json* value) {
  if (value == nullptr || !value->is_number()) return -1;
  if (value->is_number_integer()) {
    if (value->is_number_unsigned())
      return std::max<int64_t>(1, std::min<uint64_t>(value->get<uint64_t>(), INT64_MAX));
    const int64_t n = value->get<int64_t>();
    return n >= 1 ? n : -1;
  }
  const double x = value->get<double>();
  if (!(x >= 1) || x != std::floor(x)) return -1;
  return x >= 9e18 ? INT64_MAX : static_cast<int64_t>(x);
}

const json* member(const json& o, const char* name) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(name);
  return it == o.end() ? nullptr : &*it;
}

}  // namespace

const std::vector<ClientApi>& client_apis() {
  static const std::vector<ClientApi> apis = {
      {"/v1/chat/completions", "chat", AnswerFormat::kOpenAI, false},
      {"/v1/completions", "completions", AnswerFormat::kOpenAI, false},
      {"/v1/messages", "messages", AnswerFormat::kAnthropic, false},
      {"/v1/responses", "responses", AnswerFormat::kResponses, false},
      {"/api/chat", "ollama_chat", AnswerFormat::kOllama, true},
      {"/api/generate", "ollama_generate", AnswerFormat::kOllama, true},
  };
  return apis;
}

const ClientApi* client_api(std::string_view path) {
  for (const ClientApi& api : client_apis()) {
    if (path == api.path) return &api;
  }
  return nullptr;
}

bool wants_stream(const ClientApi& api, const json& body) {
  const json* stream = member(body, "stream");
  if (stream == nullptr || !stream->is_boolean()) return api.streams_by_default;
  return stream->get<bool>();
}

int64_t max_tokens_given(const ClientApi& api, const json& body) {
  int64_t most = -1;
  switch (api.format) {
    case AnswerFormat::kOpenAI:
      for (const char* name : {"max_tokens", "max_completion_tokens"}) {
        if (const int64_t n = positive_count(member(body, name)); n > 0) most = n;
      }
      break;
    case AnswerFormat::kAnthropic:
      most = positive_count(member(body, "max_tokens"));
      break;
    case AnswerFormat::kResponses:
      most = positive_count(member(body, "max_output_tokens"));
      break;
    case AnswerFormat::kOllama:
      if (const json* options = member(body, "options")) {
        most = positive_count(member(*options, "num_predict"));
      }
      break;
  }
  return most;
}

std::string refusal(const ClientApi& api, const json& body) {
  const json* previous = member(body, "previous_response_id");
  if (api.format == AnswerFormat::kResponses && previous != nullptr && !previous->is_null()) {
    return "'previous_response_id' is not supported through the hub: a stored response is "
           "kept by the pod that made it, and the next request may go to another pod; send "
           "the whole conversation as 'input' instead";
  }
  return "";
}

json error_body(const ClientApi& api, int status, const std::string& type,
                const std::string& message) {
  switch (api.format) {
    case AnswerFormat::kAnthropic:
      return {{"type", "error"},
              {"error", {{"type", http::anthropic_error_type(status)}, {"message", message}}}};
    case AnswerFormat::kOllama:
      return {{"error", message}};
    case AnswerFormat::kOpenAI:
    case AnswerFormat::kResponses:
      break;
  }
  return {{"error", {{"message", message}, {"type", type}}}};
}

const char* stream_content_type(const ClientApi& api) {
  return api.format == AnswerFormat::kOllama ? "application/x-ndjson" : "text/event-stream";
}

std::string stream_error(const ClientApi& api, const std::string& message) {
  switch (api.format) {
    case AnswerFormat::kOpenAI:
      break;
    case AnswerFormat::kAnthropic:
      return "event: error\ndata: " + error_body(api, 503, "", message).dump() + "\n\n";
    case AnswerFormat::kResponses: {
      const json event = {{"type", "error"},
                          {"code", "server_error"},
                          {"message", message},
                          {"param", nullptr},
                          {"sequence_number", 0}};
      return "event: error\ndata: " + event.dump() + "\n\n";
    }
    case AnswerFormat::kOllama:
      return error_body(api, 503, "", message).dump() + "\n";
  }
  return "data: " + error_body(api, 503, "server_error", message).dump() + "\n\ndata: [DONE]\n\n";
}

}  // namespace herd::hub
