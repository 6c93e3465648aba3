#include "server/request.h"
#include "server/request_fields.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "http/bounded_json.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;
using fields::bad;
using fields::boolean;
using fields::integer;
using fields::number;
using fields::parse_object;

}  // namespace

SamplingRequest parse_sampling(const json& body) {
  SamplingRequest r;
  r.sampler = default_sampler();
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) bad("model", "'model' must be a string");
    r.model = body["model"].get<std::string>();
  }
  r.stream = boolean(body, "stream").value_or(false);
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  r.herd_token_ids = boolean(body, "herd_token_ids").value_or(false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& o = body["stream_options"];
    if (!o.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (o.contains("include_usage") && !o["include_usage"].is_boolean()) {
      bad("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
    }
    r.include_usage = o.value("include_usage", false);
  }
  constexpr int64_t kMaxTokens = int64_t{1} << 31;
  if (auto n = integer(body, "max_completion_tokens", 1, kMaxTokens)) r.max_tokens = *n;
  if (auto n = integer(body, "max_tokens", 1, kMaxTokens)) r.max_tokens = *n;
  if (auto x = number(body, "temperature", 0, 2)) r.sampler.temperature = static_cast<float>(*x);
  if (auto x = number(body, "top_p", 0, 1)) r.sampler.top_p = static_cast<float>(*x);
  if (auto n = integer(body, "top_k", 0, 1 << 20)) r.sampler.top_k = static_cast<int32_t>(*n);
  if (auto x = number(body, "min_p", 0, 1)) r.sampler.min_p = static_cast<float>(*x);
  if (auto x = number(body, "presence_penalty", -2, 2)) {
    r.sampler.presence_penalty = static_cast<float>(*x);
  }
  if (auto x = number(body, "frequency_penalty", -2, 2)) {
    r.sampler.frequency_penalty = static_cast<float>(*x);
  }
  if (auto x = number(body, "repetition_penalty", 0, 10)) {
    // The sampler divides positive logits by it.
    if (*x == 0) bad("repetition_penalty", "'repetition_penalty' must be above 0 (1 is off)");
    r.sampler.repeat_penalty = static_cast<float>(*x);
  }
  if (auto n = integer(body, "seed", INT64_MIN, INT64_MAX)) {
    r.sampler.seed = static_cast<uint64_t>(*n);
  } else {
    // Unseeded requests differ from each other, as OpenAI's do.
    r.sampler.seed =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  if (body.contains("speculative") && !body["speculative"].is_null()) {
    const json& s = body["speculative"];
    if (s.is_boolean() && !s.get<bool>()) {
      r.speculative = engine::SpeculativeParams{};  // lookup 0: none
    } else if (s.is_object()) {
      engine::SpeculativeParams p;
      if (auto n = integer(s, "lookup", 0, 16)) p.lookup = static_cast<int>(*n);
      if (auto n = integer(s, "ngram_min", 1, 8)) p.ngram_min = static_cast<int>(*n);
      if (auto n = integer(s, "ngram_max", 1, 8)) p.ngram_max = static_cast<int>(*n);
      if (auto n = integer(s, "draft", 0, 16)) p.draft = static_cast<int>(*n);
      if (auto n = integer(s, "mtp", 0, 16)) p.mtp = static_cast<int>(*n);
      if (p.ngram_min > p.ngram_max) {
        bad("speculative", "'speculative.ngram_min' must not exceed 'speculative.ngram_max'");
      }
      r.speculative = p;
    } else {
      bad("speculative",
          "'speculative' must be false or {\"lookup\": K, \"draft\": K, \"mtp\": K, ...}");
    }
  }
  integer(body, "n", 1, 1);  // one choice per request
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 16) bad("stop", "'stop' holds at most 16 strings");
      for (const json& e : s) {
        if (!e.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
  }
  return r;
}

namespace {

ResponseFormat parse_response_format(const json& body) {
  ResponseFormat f;
  if (!body.contains("response_format") || body["response_format"].is_null()) return f;
  const json& r = body["response_format"];
  if (!r.is_object() || !r.contains("type") || !r["type"].is_string()) {
    bad("response_format",
        "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}");
  }
  const std::string type = r["type"].get<std::string>();
  if (type == "text") return f;
  auto grammar = std::make_shared<JsonGrammar>();
  if (type == "json_object") {
    f.kind = ResponseFormat::Kind::kJsonObject;
    grammar->add_start("", grammar->any_object());
  } else if (type == "json_schema") {
    f.kind = ResponseFormat::Kind::kJsonSchema;
    const char* where = "response_format.json_schema";
    if (!r.contains("json_schema") || !r["json_schema"].is_object()) {
      bad(where,
          "'response_format' of type json_schema needs 'json_schema': {\"name\": ..., "
          "\"schema\": {...}}");
    }
    const json& s = r["json_schema"];
    if (!s.contains("name") || !s["name"].is_string()) {
      bad("response_format.json_schema.name",
          "'response_format.json_schema.name' must be a string");
    }
    f.name = s["name"].get<std::string>();
    if (s.contains("strict") && !s["strict"].is_null()) {
      if (!s["strict"].is_boolean()) {
        bad("response_format.json_schema.strict",
            "'response_format.json_schema.strict' must be a boolean");
      }
      f.strict = s["strict"].get<bool>();
    }
    // OpenAI's default when no schema is given: any JSON value.
    const json schema = s.contains("schema") ? s["schema"] : json::object();
    const std::string base = "response_format.json_schema.schema";
    try {
      grammar->add_start("", grammar->add_schema(schema));
    } catch (const SchemaError& e) {
      bad(e.path().empty() ? base : base + "." + e.path(),
          "'response_format.json_schema.schema': " + e.message());
    }
  } else {
    bad("response_format.type",
        "'response_format.type' must be \"text\", \"json_object\" or "
        "\"json_schema\", not \"" +
            type + "\"");
  }
  f.grammar = std::move(grammar);
  return f;
}

}  // namespace

ApiError::ApiError(int status, std::string message, std::string type, std::string param,
                   std::string code)
    : Error("server", message),
      status_(status),
      message_(std::move(message)),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message_}, {"type", type_}};
  e["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
  e["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
  return {{"error", e}};
}

std::vector<std::string> tool_names(const nlohmann::ordered_json& tools) {
  std::vector<std::string> names;
  if (!tools.is_array()) return names;
  for (const json& t : tools) names.push_back(t["function"]["name"].get<std::string>());
  return names;
}

json arguments_as_objects(const json& messages) {
  json out = messages;
  for (json& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
        continue;
      }
      json& f = call["function"];
      if (!f.contains("arguments") || !f["arguments"].is_string()) continue;
      json object = http::parse_bounded_json<json>(f["arguments"].get<std::string>());
      if (object.is_object()) f["arguments"] = std::move(object);
    }
  }
  return out;
}

json null_content_as_empty(const json& messages) {
  json out = messages;
  for (json& m : out) {
    if (!m.is_object() || m.value("role", "") != "assistant") continue;
    if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
  }
  return out;
}

engine::SamplerParams default_sampler() {
  engine::SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  return p;
}

ChatRequest parse_chat_request(std::string_view body_text) {
  const json body = parse_object(body_text);
  ChatRequest r;
  r.sampling = parse_sampling(body);
  if (!body.contains("messages")) bad("messages", "'messages' is required");
  r.messages = body["messages"];
  if (!r.messages.is_array()) bad("messages", "'messages' must be an array");
  if (r.messages.empty()) bad("messages", "'messages' must not be empty");
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const json& m = r.messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(where, "'" + where + "' must be an object");
    if (!m.contains("role") || !m["role"].is_string()) {
      bad(where + ".role", "'" + where + ".role' must be a string");
    }
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() &&
        !m["content"].is_array()) {
      bad(where + ".content", "'" + where + ".content' must be a string or an array of parts");
    }
  }
  // Content given as an array of text parts becomes one string, as templates expect.
  for (json& m : r.messages) {
    if (m.contains("content") && m["content"].is_array()) {
      std::string text;
      for (const json& part : m["content"]) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          bad("messages.content", "only content parts of type 'text' are supported");
        }
        text += part["text"].get<std::string>();
      }
      m["content"] = text;
    }
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    r.tools = body["tools"];
    if (!r.tools.is_array()) bad("tools", "'tools' must be an array");
    for (size_t i = 0; i < r.tools.size(); ++i) {
      const json& t = r.tools[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") || !t["function"]["name"].is_string()) {
        bad(where,
            "'" + where + "' must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
    }
    if (r.tools.empty()) r.tools = nullptr;
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& c = body["tool_choice"];
    const char* shape =
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
        "\"function\", \"function\": {\"name\": ...}}";
    using Kind = ToolChoice::Kind;
    if (c == "auto") {
      r.tool_choice.kind = Kind::kAuto;
    } else if (c == "none") {
      r.tool_choice.kind = Kind::kNone;
    } else if (c == "required") {
      r.tool_choice.kind = Kind::kRequired;
    } else if (c.is_object() && c.contains("function") && c["function"].is_object() &&
               c["function"].contains("name") && c["function"]["name"].is_string()) {
      r.tool_choice.kind = Kind::kFunction;
      r.tool_choice.function = c["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice", shape);
    }
    const std::vector<std::string> names = tool_names(r.tools);
    if (r.tool_choice.forces_call() && names.empty()) {
      bad("tool_choice", "'tool_choice' asks for a tool call but the request has no 'tools'");
    }
    if (r.tool_choice.kind == Kind::kFunction &&
        std::find(names.begin(), names.end(), r.tool_choice.function) == names.end()) {
      bad("tool_choice.function.name", "'tool_choice' names the function '" +
                                           r.tool_choice.function + "', which is not in 'tools'");
    }
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    r.template_kwargs = body["chat_template_kwargs"];
  }
  r.response_format = parse_response_format(body);
  const bool logprobs = boolean(body, "logprobs").value_or(false);
  const auto top = integer(body, "top_logprobs", 0, 20);
  if (top && !logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (logprobs) r.sampling.top_logprobs = static_cast<int>(top.value_or(0));
  return r;
}

CompletionRequest parse_completion_request(std::string_view body_text) {
  const json body = parse_object(body_text);
  CompletionRequest r;
  r.sampling = parse_sampling(body);
  if (!body.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt_text = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty()) {
    for (const json& t : p) {
      if (!t.is_number_integer()) {
        bad("prompt", "'prompt' must be a string or an array of token ids");
      }
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > INT32_MAX)
        bad("prompt", "token id " + std::to_string(id) + " is out of range");
      r.prompt_tokens.push_back(static_cast<int32_t>(id));
    }
  } else {
    bad("prompt", "'prompt' must be a string or a non-empty array of token ids");
  }
  // The legacy API's logprobs is the number of top tokens.
  if (auto n = integer(body, "logprobs", 0, 20)) r.sampling.top_logprobs = static_cast<int>(*n);
  r.response_format = parse_response_format(body);
  return r;
}

}  // namespace herd::server
