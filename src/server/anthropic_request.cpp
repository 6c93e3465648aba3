#include "server/anthropic_request.h"

#include <algorithm>
#include <chrono>
#include <cmath>

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

std::string string_field(const json& o, const char* name, const std::string& where) {
  if (!o.contains(name) || !o[name].is_string()) {
    bad(where + "." + name, where + "." + name + ": must be a string");
  }
  return o[name].get<std::string>();
}

std::string block_type(const json& block, const std::string& where) {
  if (!block.is_object()) bad(where, where + ": must be a content block object");
  return string_field(block, "type", where);
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& where) {
  if (type == "image" || type == "document") {
    bad(where, where + ": herd has no vision: " + type + " blocks are not supported");
  }
  bad(where, where + ": content blocks of type '" + type + "' are not supported here");
}

// A system prompt or a tool result: a string, or an array of text blocks (joined).
std::string text_of(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(where, where + ": must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = block_type(v[i], at);
    if (type != "text") unsupported_block(type, at);
    if (!text.empty()) text += "\n";
    text += string_field(v[i], "text", at);
  }
  return text;
}

// One Anthropic message as OpenAI-shaped messages, appended to `out`: a user message's
// tool_result blocks are "tool" messages (in place, its text around them user messages); an
// assistant message is one message with its text, reasoning and tool calls.
void add_message(const json& m, const std::string& where, json& out) {
  if (!m.is_object()) bad(where, where + ": must be an object");
  const std::string role = string_field(m, "role", where);
  if (role != "user" && role != "assistant") {
    bad(where + ".role", where + ".role: must be \"user\" or \"assistant\", not \"" + role +
                             "\" (the system prompt is the top-level 'system')");
  }
  if (!m.contains("content")) bad(where + ".content", where + ".content: is required");
  const json& content = m["content"];
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content.get<std::string>()}});
    return;
  }
  if (!content.is_array()) {
    bad(where + ".content", where + ".content: must be a string or an array of content blocks");
  }
  std::string text, reasoning;
  json calls = json::array();
  auto flush_user_text = [&] {
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    const json& b = content[i];
    const std::string type = block_type(b, at);
    if (type == "text") {
      text += string_field(b, "text", at);
    } else if (type == "tool_use" && role == "assistant") {
      const std::string id = string_field(b, "id", at);
      const std::string name = string_field(b, "name", at);
      if (!b.contains("input") || !b["input"].is_object()) {
        bad(at + ".input", at + ".input: must be an object");
      }
      calls.push_back({{"id", id},
                       {"type", "function"},
                       {"function", {{"name", name}, {"arguments", b["input"].dump()}}}});
    } else if (type == "thinking" && role == "assistant") {
      reasoning += string_field(b, "thinking", at);
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Encrypted reasoning of another provider's model: nothing herd's model can read.
    } else if (type == "tool_result" && role == "user") {
      flush_user_text();
      const std::string id = string_field(b, "tool_use_id", at);
      std::string result = given(b, "content") ? text_of(b["content"], at + ".content") : "";
      if (given(b, "is_error")) {
        if (!b["is_error"].is_boolean()) bad(at + ".is_error", at + ".is_error: must be a boolean");
        // Templates have no place for a failed call: the result says so in its text.
        if (b["is_error"].get<bool>()) result = "Error: " + result;
      }
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking" ||
               type == "tool_result") {
      bad(at, at + ": a " + type + " block cannot be in a " + role + " message");
    } else {
      unsupported_block(type, at);
    }
  }
  if (role == "user") {
    flush_user_text();
    return;
  }
  json a = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) a["reasoning_content"] = reasoning;
  if (!calls.empty()) a["tool_calls"] = std::move(calls);
  out.push_back(std::move(a));
}

void parse_tools(const json& body, ChatRequest& r) {
  if (!given(body, "tools")) return;
  const json& tools = body["tools"];
  if (!tools.is_array()) bad("tools", "tools: must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) bad(at, at + ": must be an object");
    if (given(t, "type") && t["type"] != "custom") {
      bad(at + ".type", at +
                            ".type: herd runs no server tools, only custom tools ({\"name\", "
                            "\"input_schema\"}); not " +
                            t["type"].dump());
    }
    const std::string name = string_field(t, "name", at);
    if (!t.contains("input_schema") || !t["input_schema"].is_object()) {
      bad(at + ".input_schema", at + ".input_schema: must be a JSON schema object");
    }
    json f = {{"name", name}};
    if (given(t, "description")) f["description"] = string_field(t, "description", at);
    f["parameters"] = t["input_schema"];
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  if (!out.empty()) r.tools = std::move(out);
}

void parse_tool_choice(const json& body, ChatRequest& r) {
  if (!given(body, "tool_choice")) return;
  const json& c = body["tool_choice"];
  if (!c.is_object() || !c.contains("type") || !c["type"].is_string()) {
    bad("tool_choice",
        "tool_choice: must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"} (\"tool\" "
        "with a \"name\")");
  }
  const std::string type = c["type"].get<std::string>();
  using Kind = ToolChoice::Kind;
  if (type == "auto") {
    r.tool_choice.kind = Kind::kAuto;
  } else if (type == "none") {
    r.tool_choice.kind = Kind::kNone;
  } else if (type == "any") {
    r.tool_choice.kind = Kind::kRequired;
  } else if (type == "tool") {
    r.tool_choice.kind = Kind::kFunction;
    r.tool_choice.function = string_field(c, "name", "tool_choice");
  } else {
    bad("tool_choice.type",
        "tool_choice.type: must be \"auto\", \"any\", \"tool\" or \"none\", "
        "not \"" +
            type + "\"");
  }
  if (given(c, "disable_parallel_tool_use") && !c["disable_parallel_tool_use"].is_boolean()) {
    bad("tool_choice.disable_parallel_tool_use",
        "tool_choice.disable_parallel_tool_use: must be a boolean");
  }
  const std::vector<std::string> names = tool_names(r.tools);
  if (r.tool_choice.forces_call() && names.empty()) {
    bad("tool_choice", "tool_choice: asks for a tool call but the request has no tools");
  }
  if (r.tool_choice.kind == Kind::kFunction &&
      std::find(names.begin(), names.end(), r.tool_choice.function) == names.end()) {
    bad("tool_choice.name",
        "tool_choice.name: the tool '" + r.tool_choice.function + "' is not in tools");
  }
}

// output_config.format {"type": "json_schema", "schema": {...}}: the reply is JSON matching
// the schema (within JsonGrammar's subset).
void parse_output_format(const json& body, ChatRequest& r) {
  if (!given(body, "output_config")) return;
  const json& config = body["output_config"];
  if (!config.is_object()) bad("output_config", "output_config: must be an object");
  if (given(config, "effort") && !config["effort"].is_string()) {
    bad("output_config.effort", "output_config.effort: must be a string");
  }
  if (!given(config, "format")) return;
  const json& f = config["format"];
  if (!f.is_object() || !f.contains("type") || f["type"] != "json_schema" ||
      !f.contains("schema") || !f["schema"].is_object()) {
    bad("output_config.format",
        "output_config.format: must be {\"type\": \"json_schema\", \"schema\": {...}}");
  }
  auto grammar = std::make_shared<JsonGrammar>();
  try {
    grammar->add_start("", grammar->add_schema(f["schema"]));
  } catch (const SchemaError& e) {
    const std::string base = "output_config.format.schema";
    bad(e.path().empty() ? base : base + "." + e.path(), base + ": " + e.message());
  }
  r.response_format.kind = ResponseFormat::Kind::kJsonSchema;
  r.response_format.strict = true;
  r.response_format.grammar = std::move(grammar);
}

}  // namespace

AnthropicRequest parse_anthropic_request(std::string_view body_text, AnthropicEndpoint endpoint) {
  const json body = parse_object(body_text);
  AnthropicRequest out;
  ChatRequest& r = out.chat;
  SamplingRequest& s = r.sampling;
  s.sampler = default_sampler();
  if (!body.contains("model") || !body["model"].is_string()) {
    bad("model", "model: is required and must be a string");
  }
  s.model = body["model"].get<std::string>();
  if (endpoint == AnthropicEndpoint::kMessages) {
    if (!given(body, "max_tokens")) bad("max_tokens", "max_tokens: Field required");
    s.max_tokens = *integer(body, "max_tokens", 1, int64_t{1} << 31);
    if (given(body, "stream")) {
      if (!body["stream"].is_boolean()) bad("stream", "stream: must be a boolean");
      s.stream = body["stream"].get<bool>();
    }
  }
  // herd's extension for a hub (request.h): the answer carries the generated tokens' ids.
  s.herd_token_ids = boolean(body, "herd_token_ids").value_or(false);
  if (auto x = number(body, "temperature", 0, 1)) s.sampler.temperature = static_cast<float>(*x);
  if (auto x = number(body, "top_p", 0, 1)) s.sampler.top_p = static_cast<float>(*x);
  if (auto n = integer(body, "top_k", 0, 1 << 20)) s.sampler.top_k = static_cast<int32_t>(*n);
  // Unseeded requests differ from each other, as Anthropic's do.
  s.sampler.seed =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (given(body, "stop_sequences")) {
    const json& stops = body["stop_sequences"];
    if (!stops.is_array()) bad("stop_sequences", "stop_sequences: must be an array of strings");
    if (stops.size() > 16) bad("stop_sequences", "stop_sequences: at most 16 strings");
    for (const json& e : stops) {
      if (!e.is_string() || e.get<std::string>().empty()) {
        bad("stop_sequences", "stop_sequences: must be an array of non-empty strings");
      }
      s.stop.push_back(e.get<std::string>());
    }
  }
  if (given(body, "metadata") && !body["metadata"].is_object()) {
    bad("metadata", "metadata: must be an object");
  }
  if (given(body, "thinking")) {
    const json& t = body["thinking"];
    const std::string type = t.is_object() && t.contains("type") && t["type"].is_string()
                                 ? t["type"].get<std::string>()
                                 : "";
    if (type == "enabled") {
      // The budget is checked as Anthropic's API has it; herd's reasoning is not cut at it.
      if (!t.contains("budget_tokens")) {
        bad("thinking.budget_tokens", "thinking.budget_tokens: Field required");
      }
      integer(t, "budget_tokens", 1, int64_t{1} << 31);
      out.thinking = true;
    } else if (type == "disabled") {
      out.thinking = false;
    } else if (type == "adaptive") {
      out.thinking = true;
    } else {
      bad("thinking",
          "thinking: must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": "
          "\"disabled\"}");
    }
  }

  r.messages = json::array();
  if (given(body, "system"))
    r.messages.push_back({{"role", "system"}, {"content", text_of(body["system"], "system")}});
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    bad("messages", "messages: must be a non-empty array of messages");
  }
  const json& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    add_message(messages[i], "messages[" + std::to_string(i) + "]", r.messages);
  }
  // A final assistant message is continued: its text ends the prompt.
  const json& last = messages.back();
  if (last["role"] == "assistant") {
    const json& a = r.messages.back();
    if (a.contains("tool_calls") || a.contains("reasoning_content")) {
      bad("messages", "messages: a final assistant message is continued, so it may hold only text");
    }
    out.prefill = a["content"].get<std::string>();
    r.messages.erase(r.messages.size() - 1);
  }
  parse_tools(body, r);
  parse_tool_choice(body, r);
  parse_output_format(body, r);
  if (!out.prefill.empty() && (r.tool_choice.forces_call() || r.response_format.grammar)) {
    bad("messages",
        "messages: a final assistant message cannot be continued when tool_choice forces a "
        "call or output_config.format holds the reply to JSON");
  }
  return out;
}

}  // namespace herd::server
