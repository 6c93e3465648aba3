#include "server/responses_request.h"

#include <algorithm>
#include <map>

#include "http/bounded_json.h"
#include "server/json_schema.h"
#include "server/request_fields.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;
using fields::bad;
using fields::given;

// A string field: absent or null is "", anything else but a string is a 400.
std::string string_field(const json& o, const char* name, const std::string& where) {
  if (!given(o, name)) return {};
  if (!o[name].is_string()) bad(where, "'" + where + "' must be a string");
  return o[name].get<std::string>();
}

std::string required_string(const json& o, const char* name, const std::string& where) {
  if (!given(o, name)) bad(where, "'" + where + "' is required");
  return string_field(o, name, where);
}

// An item's type: its "type", else "message" for an item with a role (OpenAI's easy input
// message).
std::string item_type(const json& item) {
  if (item.contains("type")) return item["type"].get<std::string>();
  return "message";
}

// The text of a message's content: a string, or parts of text (input_text, output_text, a
// refusal), joined. Other parts are refused: herd serves text.
std::string content_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(where, "'" + where + "' must be a string or an array of parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) bad(at, "'" + at + "' must be an object");
    const std::string type = required_string(part, "type", at + ".type");
    if (type == "input_text" || type == "output_text" || type == "text") {
      text += required_string(part, "text", at + ".text");
    } else if (type == "refusal") {
      text += required_string(part, "refusal", at + ".refusal");
    } else {
      bad(at + ".type", "content of type '" + type +
                            "' is not supported: herd's Responses API takes text "
                            "(input_text, output_text)");
    }
  }
  return text;
}

// Checks one input item (a message, a function call, its output, reasoning).
void check_item(const json& item, const std::string& where) {
  if (!item.is_object()) bad(where, "'" + where + "' must be an object");
  if (item.contains("type") && !item["type"].is_string()) {
    bad(where + ".type", "'" + where + ".type' must be a string");
  }
  if (!item.contains("type") && !item.contains("role")) {
    bad(where, "'" + where + "' must have a 'type' or a 'role'");
  }
  const std::string type = item_type(item);
  if (type == "message") {
    const std::string role = required_string(item, "role", where + ".role");
    if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
      bad(where + ".role", "'" + where +
                               ".role' must be \"user\", \"system\", \"developer\" or "
                               "\"assistant\", not \"" +
                               role + "\"");
    }
    if (!item.contains("content")) bad(where + ".content", "'" + where + ".content' is required");
    content_text(item["content"], where + ".content");
  } else if (type == "function_call") {
    required_string(item, "call_id", where + ".call_id");
    required_string(item, "name", where + ".name");
    required_string(item, "arguments", where + ".arguments");
  } else if (type == "function_call_output") {
    required_string(item, "call_id", where + ".call_id");
    if (!given(item, "output")) bad(where + ".output", "'" + where + ".output' is required");
    content_text(item["output"], where + ".output");
  } else if (type == "reasoning") {
    for (const char* list : {"summary", "content"}) {
      if (!given(item, list)) continue;
      const std::string at = where + "." + list;
      if (!item[list].is_array()) bad(at, "'" + at + "' must be an array");
      for (size_t i = 0; i < item[list].size(); ++i) {
        const json& part = item[list][i];
        const std::string p = at + "[" + std::to_string(i) + "]";
        if (!part.is_object()) bad(p, "'" + p + "' must be an object");
        required_string(part, "text", p + ".text");
      }
    }
  } else if (type == "item_reference") {
    bad(where + ".type",
        "input items of type 'item_reference' are not supported: send the items, or "
        "'previous_response_id'");
  } else {
    bad(where + ".type", "input items of type '" + type +
                             "' are not supported (herd takes message, function_call, "
                             "function_call_output and reasoning items)");
  }
}

json parse_input(const json& body) {
  if (!given(body, "input")) return json::array();
  const json& input = body["input"];
  if (input.is_string()) {
    return json::array({{{"type", "message"}, {"role", "user"}, {"content", input}}});
  }
  if (!input.is_array()) bad("input", "'input' must be a string or an array of items");
  for (size_t i = 0; i < input.size(); ++i)
    check_item(input[i], "input[" + std::to_string(i) + "]");
  return input;
}

// [{type: "function", name, description, parameters, strict}] as the chat request's tools
// ({type: "function", function: {...}}).
json parse_tools(const json& body, json& chat_tools) {
  chat_tools = nullptr;
  if (!given(body, "tools")) return json::array();
  const json& tools = body["tools"];
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) bad(where, "'" + where + "' must be an object");
    const std::string type = required_string(t, "type", where + ".type");
    if (type != "function") {
      bad(where + ".type", "tools of type '" + type +
                               "' are not supported: herd's Responses API serves function "
                               "tools");
    }
    json f = {{"name", required_string(t, "name", where + ".name")}};
    if (given(t, "description"))
      f["description"] = string_field(t, "description", where + ".description");
    if (given(t, "parameters")) {
      if (!t["parameters"].is_object()) {
        bad(where + ".parameters", "'" + where + ".parameters' must be an object");
      }
      f["parameters"] = t["parameters"];
    }
    json echoed = {{"type", "function"},
                   {"name", f["name"]},
                   {"description", f.value("description", json())},
                   {"parameters", f.value("parameters", json())},
                   {"strict", true}};
    if (given(t, "strict")) {
      if (!t["strict"].is_boolean())
        bad(where + ".strict", "'" + where + ".strict' must be a boolean");
      f["strict"] = t["strict"];
      echoed["strict"] = t["strict"];
    }
    if (chat_tools.is_null()) chat_tools = json::array();
    chat_tools.push_back({{"type", "function"}, {"function", f}});
    out.push_back(std::move(echoed));
  }
  return out;
}

// "auto", "none", "required" or {type: "function", name}.
json parse_tool_choice(const json& body, const json& chat_tools, ToolChoice& choice) {
  if (!given(body, "tool_choice")) return "auto";
  const json& c = body["tool_choice"];
  using Kind = ToolChoice::Kind;
  if (c == "auto") {
    choice.kind = Kind::kAuto;
  } else if (c == "none") {
    choice.kind = Kind::kNone;
  } else if (c == "required") {
    choice.kind = Kind::kRequired;
  } else if (c.is_object() && c.value("type", json()) == "function") {
    choice.kind = Kind::kFunction;
    choice.function = required_string(c, "name", "tool_choice.name");
  } else {
    bad("tool_choice",
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
        "\"name\": ...} (herd serves function tools)");
  }
  const std::vector<std::string> names = tool_names(chat_tools);
  if (choice.forces_call() && names.empty()) {
    bad("tool_choice", "'tool_choice' asks for a tool call but the request has no 'tools'");
  }
  if (choice.kind == Kind::kFunction &&
      std::find(names.begin(), names.end(), choice.function) == names.end()) {
    bad("tool_choice.name",
        "'tool_choice' names the function '" + choice.function + "', which is not in 'tools'");
  }
  return c;
}

// text.format: {type: "text"} | {type: "json_object"} | {type: "json_schema", name, schema,
// strict}, compiled to the reply's grammar.
json parse_text_format(const json& body, ResponseFormat& f) {
  if (!given(body, "text")) return {{"type", "text"}};
  const json& text = body["text"];
  if (!text.is_object()) bad("text", "'text' must be an object");
  if (given(text, "verbosity") && !text["verbosity"].is_string()) {
    bad("text.verbosity", "'text.verbosity' must be a string");
  }
  if (!given(text, "format")) return {{"type", "text"}};
  const json& format = text["format"];
  if (!format.is_object()) bad("text.format", "'text.format' must be an object");
  const std::string type = required_string(format, "type", "text.format.type");
  if (type == "text") return format;
  auto grammar = std::make_shared<JsonGrammar>();
  if (type == "json_object") {
    f.kind = ResponseFormat::Kind::kJsonObject;
    grammar->add_start("", grammar->any_object());
  } else if (type == "json_schema") {
    f.kind = ResponseFormat::Kind::kJsonSchema;
    f.name = required_string(format, "name", "text.format.name");
    if (given(format, "strict")) {
      if (!format["strict"].is_boolean())
        bad("text.format.strict", "'text.format.strict' must be a boolean");
      f.strict = format["strict"].get<bool>();
    }
    if (!given(format, "schema")) bad("text.format.schema", "'text.format.schema' is required");
    if (!format["schema"].is_object())
      bad("text.format.schema", "'text.format.schema' must be an object");
    try {
      grammar->add_start("", grammar->add_schema(format["schema"]));
    } catch (const SchemaError& e) {
      const std::string base = "text.format.schema";
      bad(e.path().empty() ? base : base + "." + e.path(), "'" + base + "': " + e.message());
    }
  } else {
    bad("text.format.type",
        "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"" + type +
            "\"");
  }
  f.grammar = std::move(grammar);
  return format;
}

// The fields herd reads as OpenAI's chat endpoint does (parse_sampling), herd's extensions
// included; every other field is the Responses API's own.
constexpr const char* kSamplingFields[] = {"model",
                                           "stream",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "min_p",
                                           "seed",
                                           "stop",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "repetition_penalty",
                                           "speculative",
                                           "ignore_eos",
                                           "herd_token_ids"};

}  // namespace

ResponsesRequest parse_responses_request(std::string_view body_text) {
  std::string problem;
  const json body = http::parse_bounded_json<json>(body_text, &problem);
  if (body.is_discarded()) bad("", "the request body: " + problem);
  if (!body.is_object()) bad("", "the request body must be a JSON object");

  ResponsesRequest r;
  json sampling = json::object();
  for (const char* name : kSamplingFields) {
    if (body.contains(name)) sampling[name] = body[name];
  }
  r.chat.sampling = parse_sampling(sampling);
  if (given(body, "temperature")) r.temperature = body["temperature"].get<double>();
  if (given(body, "top_p")) r.top_p = body["top_p"].get<double>();
  if (given(body, "max_output_tokens")) {
    const json& v = body["max_output_tokens"];
    constexpr int64_t kMax = int64_t{1} << 31;
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > kMax) ||
        v.get<int64_t>() < 1 || v.get<int64_t>() > kMax) {
      bad("max_output_tokens",
          "'max_output_tokens' must be an integer between 1 and " + std::to_string(kMax));
    }
    r.chat.sampling.max_tokens = v.get<int64_t>();
    r.max_output_tokens = v;
  }

  if (given(body, "background") && body["background"] != false) {
    bad("background", "background responses are not supported by herd");
  }
  if (given(body, "conversation")) {
    bad("conversation", "'conversation' is not supported by herd: use 'previous_response_id'");
  }
  if (given(body, "prompt")) bad("prompt", "prompt templates ('prompt') are not supported by herd");
  if (given(body, "truncation") && body["truncation"] != "auto" &&
      body["truncation"] != "disabled") {
    bad("truncation", "'truncation' must be \"auto\" or \"disabled\"");
  }

  r.input = parse_input(body);
  r.previous_response_id = string_field(body, "previous_response_id", "previous_response_id");
  if (r.input.empty() && r.previous_response_id.empty()) {
    bad("input", "'input' is required (a string or a non-empty array of items)");
  }
  if (given(body, "instructions")) {
    r.instructions = string_field(body, "instructions", "instructions");
  }
  r.tools = parse_tools(body, r.chat.tools);
  r.tool_choice = parse_tool_choice(body, r.chat.tools, r.chat.tool_choice);
  r.text_format = parse_text_format(body, r.chat.response_format);
  if (given(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object()) {
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    r.chat.template_kwargs = body["chat_template_kwargs"];
  }
  if (given(body, "reasoning")) {
    const json& reasoning = body["reasoning"];
    if (!reasoning.is_object()) bad("reasoning", "'reasoning' must be an object");
    const std::string effort = string_field(reasoning, "effort", "reasoning.effort");
    string_field(reasoning, "summary", "reasoning.summary");
    r.reasoning = {{"effort", reasoning.value("effort", json())},
                   {"summary", reasoning.value("summary", json())}};
    // gpt-oss's template reads the effort from this variable.
    if (!effort.empty() && !r.chat.template_kwargs.contains("reasoning_effort")) {
      r.chat.template_kwargs["reasoning_effort"] = effort;
    }
  }
  if (given(body, "store")) {
    if (!body["store"].is_boolean()) bad("store", "'store' must be a boolean");
    r.store = body["store"].get<bool>();
  }
  if (given(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean()) {
      bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    }
    r.parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  }
  if (given(body, "metadata")) {
    const json& m = body["metadata"];
    if (!m.is_object() || m.size() > 16) {
      bad("metadata", "'metadata' must be an object of at most 16 string values");
    }
    for (const auto& [key, value] : m.items()) {
      if (!value.is_string()) bad("metadata." + key, "'metadata." + key + "' must be a string");
    }
    r.metadata = m;
  }
  if (given(body, "user")) r.user = string_field(body, "user", "user");
  return r;
}

json responses_messages(const json& instructions, const json& items) {
  json out = json::array();
  if (instructions.is_string()) out.push_back({{"role", "system"}, {"content", instructions}});
  std::string reasoning;   // of the next assistant message
  bool open_turn = false;  // out's last message is an assistant's that calls may join
  std::map<std::string, std::string> call_names;  // call_id -> function name
  auto assistant = [&](std::string content) {
    json m = {{"role", "assistant"}, {"content", std::move(content)}};
    if (!reasoning.empty()) m["reasoning_content"] = std::move(reasoning);
    reasoning.clear();
    out.push_back(std::move(m));
    open_turn = true;
  };
  for (const json& item : items) {
    const std::string type = item_type(item);
    if (type == "message") {
      std::string role = item["role"].get<std::string>();
      std::string text = content_text(item["content"], "input");
      if (role == "assistant") {
        assistant(std::move(text));
        continue;
      }
      if (role == "developer") role = "system";
      if (role == "system" && out.size() == 1 && out[0]["role"] == "system") {
        // Instructions and the system messages that open the input are one system message:
        // templates refuse a system message that is not the first.
        out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + text;
        continue;
      }
      out.push_back({{"role", role}, {"content", std::move(text)}});
      open_turn = false;
    } else if (type == "function_call") {
      const std::string call_id = item["call_id"].get<std::string>();
      const std::string name = item["name"].get<std::string>();
      call_names[call_id] = name;
      if (!open_turn) assistant("");
      json& m = out.back();
      if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
      m["tool_calls"].push_back({{"id", call_id},
                                 {"type", "function"},
                                 {"function", {{"name", name}, {"arguments", item["arguments"]}}}});
    } else if (type == "function_call_output") {
      const std::string call_id = item["call_id"].get<std::string>();
      json m = {{"role", "tool"},
                {"tool_call_id", call_id},
                {"content", content_text(item["output"], "input")}};
      if (auto it = call_names.find(call_id); it != call_names.end()) m["name"] = it->second;
      out.push_back(std::move(m));
      open_turn = false;
    } else if (type == "reasoning") {
      // The reasoning's text where the item has it, else its summary.
      std::string text;
      for (const char* list : {"content", "summary"}) {
        if (!given(item, list)) continue;
        for (const json& part : item[list]) {
          if (!text.empty()) text += "\n";
          text += part["text"].get<std::string>();
        }
        if (!text.empty()) break;
      }
      if (!reasoning.empty() && !text.empty()) reasoning += "\n";
      reasoning += text;
      open_turn = false;
    }
  }
  return out;
}

}  // namespace herd::server
