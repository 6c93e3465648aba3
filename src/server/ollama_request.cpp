#include "server/ollama_request.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "http/bounded_json.h"
#include "server/request_fields.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;
using fields::bad;
using fields::boolean;
using fields::given;
using fields::integer;
using fields::number;
using fields::parse_object;
// Ollama's clients (Go's, JavaScript's) may write an integer option as 40.0.
constexpr fields::Integers kWhole = fields::Integers::kWholeFloats;

std::string string_field(const json& o, const char* name, const std::string& where = "") {
  if (!given(o, name)) return {};
  const std::string field = where + name;
  if (!o[name].is_string()) bad(field, "'" + field + "' must be a string");
  return o[name].get<std::string>();
}

// The model (required, as Ollama requires it), stream (Ollama's default: true), options,
// keep_alive (accepted, ignored: herd keeps its one model loaded).
SamplingRequest parse_ollama_sampling(const json& body) {
  SamplingRequest r;
  r.sampler = ollama_default_sampler();
  r.model = string_field(body, "model");
  if (r.model.empty()) bad("model", "'model' is required");
  r.stream = boolean(body, "stream").value_or(true);
  // herd's extension for a hub (request.h), a top-level field as Ollama's own are.
  r.herd_token_ids = boolean(body, "herd_token_ids").value_or(false);
  if (given(body, "keep_alive") && !body["keep_alive"].is_string() &&
      !body["keep_alive"].is_number()) {
    bad("keep_alive", "'keep_alive' must be a duration (\"5m\") or a number of seconds");
  }
  bool seeded = false;
  if (given(body, "options")) {
    const json& o = body["options"];
    const std::string w = "options.";
    if (!o.is_object()) bad("options", "'options' must be an object");
    if (auto x = number(o, "temperature", 0, 100, w))
      r.sampler.temperature = static_cast<float>(*x);
    if (auto n = integer(o, "top_k", 0, 1 << 20, w, kWhole))
      r.sampler.top_k = static_cast<int32_t>(*n);
    if (auto x = number(o, "top_p", 0, 1, w)) r.sampler.top_p = static_cast<float>(*x);
    if (auto x = number(o, "min_p", 0, 1, w)) r.sampler.min_p = static_cast<float>(*x);
    if (auto x = number(o, "repeat_penalty", 0, 10, w)) {
      // The sampler divides positive logits by it.
      if (*x == 0) bad("options.repeat_penalty", "'options.repeat_penalty' must be above 0");
      r.sampler.repeat_penalty = static_cast<float>(*x);
    }
    // -1: the whole context (up to 65536 tokens); 0: no penalty window.
    if (auto n = integer(o, "repeat_last_n", -1, 65536, w, kWhole)) {
      r.sampler.penalty_last_n = *n < 0 ? 65536 : static_cast<int32_t>(*n);
    }
    if (auto x = number(o, "presence_penalty", -2, 2, w)) {
      r.sampler.presence_penalty = static_cast<float>(*x);
    }
    if (auto x = number(o, "frequency_penalty", -2, 2, w)) {
      r.sampler.frequency_penalty = static_cast<float>(*x);
    }
    // -1: until the context is full; -2: Ollama's "fill the context", the same here.
    if (auto n = integer(o, "num_predict", -2, int64_t{1} << 31, w, kWhole)) {
      r.max_tokens = *n < 0 ? -1 : *n;
    }
    // -1: a random seed (Ollama's default).
    if (auto n = integer(o, "seed", INT64_MIN, INT64_MAX, w, kWhole); n && *n != -1) {
      r.sampler.seed = static_cast<uint64_t>(*n);
      seeded = true;
    }
    // The server's context is fixed when it starts (herd serve --ctx): a request's num_ctx
    // is checked and ignored; a prompt that does not fit is refused as too long.
    integer(o, "num_ctx", 1, int64_t{1} << 31, w, kWhole);
    if (given(o, "stop")) {
      const json& s = o["stop"];
      if (s.is_string()) {
        r.stop.push_back(s.get<std::string>());
      } else if (s.is_array()) {
        if (s.size() > 16) bad("options.stop", "'options.stop' holds at most 16 strings");
        for (const json& e : s) {
          if (!e.is_string()) bad("options.stop", "'options.stop' must be an array of strings");
          r.stop.push_back(e.get<std::string>());
        }
      } else {
        bad("options.stop", "'options.stop' must be an array of strings");
      }
    }
    // The rest (num_thread, num_gpu, mirostat, typical_p, ...) is the server's business or
    // a sampler herd does not have: ignored, as Ollama ignores options it does not know.
  }
  if (!seeded) {
    r.sampler.seed =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return r;
}

// format: "json" (any JSON object), a JSON schema, or "" / null (text).
ResponseFormat parse_format(const json& body) {
  ResponseFormat f;
  if (!given(body, "format")) return f;
  const json& v = body["format"];
  auto grammar = std::make_shared<JsonGrammar>();
  if (v.is_string()) {
    if (v.get<std::string>().empty()) return f;
    if (v.get<std::string>() != "json") bad("format", "'format' must be \"json\" or a JSON schema");
    f.kind = ResponseFormat::Kind::kJsonObject;
    grammar->add_start("", grammar->any_object());
  } else if (v.is_object()) {
    f.kind = ResponseFormat::Kind::kJsonSchema;
    try {
      grammar->add_start("", grammar->add_schema(v));
    } catch (const SchemaError& e) {
      bad(e.path().empty() ? "format" : "format." + e.path(), "'format': " + e.message());
    }
  } else {
    bad("format", "'format' must be \"json\" or a JSON schema");
  }
  f.grammar = std::move(grammar);
  return f;
}

// think: true or false (the template's enable_thinking), or "high" / "medium" / "low"
// (reasoning_effort, as gpt-oss's template reads it).
void parse_think(const json& body, json& kwargs) {
  if (!given(body, "think")) return;
  const json& t = body["think"];
  if (t.is_boolean()) {
    kwargs["enable_thinking"] = t.get<bool>();
  } else if (t == "high" || t == "medium" || t == "low") {
    kwargs["enable_thinking"] = true;
    kwargs["reasoning_effort"] = t;
  } else {
    bad("think", "'think' must be true, false, \"high\", \"medium\" or \"low\"");
  }
}

void refuse_images(const json& o, const std::string& where) {
  if (!given(o, "images")) return;
  if (!o["images"].is_array()) bad(where + "images", "'" + where + "images' must be an array");
  if (!o["images"].empty()) {
    bad(where + "images", "herd has no vision: '" + where + "images' must be empty");
  }
}

// Ollama's tool list is OpenAI's: [{"type": "function", "function": {"name", ...}}].
json parse_tools(const json& body) {
  if (!given(body, "tools")) return nullptr;
  const json& tools = body["tools"];
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string()) {
      bad(where, "'" + where + "' must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  return tools.empty() ? json(nullptr) : tools;
}

// herd's extension (Ollama's API has none): OpenAI's tool_choice, "auto", "none",
// "required" or {"type": "function", "function": {"name": ...}}.
ToolChoice parse_tool_choice(const json& body, const json& tools) {
  ToolChoice c;
  if (!given(body, "tool_choice")) return c;
  const json& v = body["tool_choice"];
  using Kind = ToolChoice::Kind;
  if (v == "auto") {
    c.kind = Kind::kAuto;
  } else if (v == "none") {
    c.kind = Kind::kNone;
  } else if (v == "required") {
    c.kind = Kind::kRequired;
  } else if (v.is_object() && v.contains("function") && v["function"].is_object() &&
             v["function"].contains("name") && v["function"]["name"].is_string()) {
    c.kind = Kind::kFunction;
    c.function = v["function"]["name"].get<std::string>();
  } else {
    bad("tool_choice",
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}");
  }
  const std::vector<std::string> names = tool_names(tools);
  if (c.forces_call() && names.empty()) {
    bad("tool_choice", "'tool_choice' asks for a tool call but the request has no 'tools'");
  }
  if (c.kind == Kind::kFunction &&
      std::find(names.begin(), names.end(), c.function) == names.end()) {
    bad("tool_choice",
        "'tool_choice' names the function '" + c.function + "', which is not in 'tools'");
  }
  return c;
}

// Ollama's messages in OpenAI's shape. Ollama's calls have no ids and its tool results name
// the tool (tool_name) instead: each call gets an id, and each result the id of the earliest
// call of its name not yet answered (else of the earliest call not yet answered).
json openai_messages(const json& messages) {
  struct Call {
    std::string id, name;
    bool answered = false;
  };
  std::vector<Call> calls;
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "].";
    if (!m.is_object()) bad("messages", "'messages[" + std::to_string(i) + "]' must be an object");
    if (!m.contains("role") || !m["role"].is_string()) {
      bad(where + "role", "'" + where + "role' must be a string");
    }
    refuse_images(m, where);
    json o = {{"role", m["role"]}, {"content", string_field(m, "content", where)}};
    const std::string role = m["role"].get<std::string>();
    if (const std::string thinking = string_field(m, "thinking", where); !thinking.empty()) {
      o["reasoning_content"] = thinking;
    }
    if (given(m, "tool_calls")) {
      const json& tc = m["tool_calls"];
      if (!tc.is_array()) bad(where + "tool_calls", "'" + where + "tool_calls' must be an array");
      json list = json::array();
      for (size_t k = 0; k < tc.size(); ++k) {
        const std::string cw = where + "tool_calls[" + std::to_string(k) + "]";
        const json& c = tc[k];
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string()) {
          bad(cw, "'" + cw + "' must be {\"function\": {\"name\": ..., \"arguments\": {...}}}");
        }
        const json& f = c["function"];
        json arguments = f.contains("arguments") ? f["arguments"] : json::object();
        if (arguments.is_null()) arguments = json::object();
        if (!arguments.is_object() && !arguments.is_string()) {
          bad(cw + ".function.arguments", "'" + cw + ".function.arguments' must be an object");
        }
        std::string id = "call_" + std::to_string(i) + "_" + std::to_string(k);
        if (c.contains("id") && c["id"].is_string() && !c["id"].get<std::string>().empty()) {
          id = c["id"].get<std::string>();
        }
        const std::string name = f["name"].get<std::string>();
        calls.push_back({id, name});
        list.push_back({{"id", id},
                        {"type", "function"},
                        {"function", {{"name", name}, {"arguments", std::move(arguments)}}}});
      }
      if (!list.empty()) o["tool_calls"] = std::move(list);
    }
    if (role == "tool") {
      const std::string name = string_field(m, "tool_name", where);
      std::string id = string_field(m, "tool_call_id", where);
      if (id.empty()) {
        Call* match = nullptr;
        for (Call& c : calls) {
          if (!c.answered && c.name == name) {
            match = &c;
            break;
          }
        }
        for (Call& c : calls) {
          if (match == nullptr && !c.answered) match = &c;
        }
        if (match != nullptr) {
          match->answered = true;
          id = match->id;
        }
      }
      if (!name.empty()) o["name"] = name;
      if (!id.empty()) o["tool_call_id"] = id;
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

engine::SamplerParams ollama_default_sampler() {
  engine::SamplerParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.1f;
  p.penalty_last_n = 64;
  return p;
}

OllamaChatRequest parse_ollama_chat(std::string_view body_text) {
  const json body = parse_object(body_text);
  OllamaChatRequest r;
  r.chat.sampling = parse_ollama_sampling(body);
  if (given(body, "messages") && !body["messages"].is_array()) {
    bad("messages", "'messages' must be an array");
  }
  const json messages = given(body, "messages") ? body["messages"] : json::array();
  r.chat.messages = openai_messages(messages);
  r.load_only = r.chat.messages.empty();
  r.chat.tools = parse_tools(body);
  r.chat.tool_choice = parse_tool_choice(body, r.chat.tools);
  parse_think(body, r.chat.template_kwargs);
  r.chat.response_format = parse_format(body);
  return r;
}

OllamaGenerateRequest parse_ollama_generate(std::string_view body_text) {
  const json body = parse_object(body_text);
  OllamaGenerateRequest r;
  r.sampling = parse_ollama_sampling(body);
  r.prompt = string_field(body, "prompt");
  r.system = string_field(body, "system");
  r.raw = boolean(body, "raw").value_or(false);
  refuse_images(body, "");
  if (!string_field(body, "template").empty()) {
    bad("template",
        "'template' is not supported: herd renders prompts with the model's own chat "
        "template (send raw: true with the prompt written out instead)");
  }
  if (!string_field(body, "suffix").empty()) {
    bad("suffix", "'suffix' is not supported: herd does not fill in the middle");
  }
  if (given(body, "context")) {
    if (!body["context"].is_array()) bad("context", "'context' must be an array");
    if (!body["context"].empty()) {
      bad("context", "'context' is not supported: send the conversation as messages to /api/chat");
    }
  }
  parse_think(body, r.template_kwargs);
  r.format = parse_format(body);
  r.load_only = r.prompt.empty();
  return r;
}

void check_ollama_model(const std::string& requested, const std::string& served) {
  if (requested == served || requested == served + ":latest") return;
  throw ApiError(404, "model '" + requested + "' not found (this server has '" + served + "')",
                 "invalid_request_error", "model", "model_not_found");
}

}  // namespace herd::server
