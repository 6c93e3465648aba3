#include "server/argument_types.h"

#include <nlohmann/json.hpp>

#include "http/bounded_json.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

uint8_t type_named(const json& name) {
  if (!name.is_string()) return kJsonAny;
  const std::string& s = name.get_ref<const std::string&>();
  if (s == "string") return kJsonString;
  if (s == "number" || s == "integer") return kJsonNumber;
  if (s == "boolean") return kJsonBoolean;
  if (s == "object") return kJsonObject;
  if (s == "array") return kJsonArray;
  if (s == "null") return kJsonNull;
  return kJsonAny;
}

uint8_t type_of_value(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return kJsonString;
    case json::value_t::boolean:
      return kJsonBoolean;
    case json::value_t::object:
      return kJsonObject;
    case json::value_t::array:
      return kJsonArray;
    case json::value_t::null:
      return kJsonNull;
    default:
      return kJsonNumber;
  }
}

// The types `schema` allows; kJsonAny when one of its parts says nothing (then anything goes).
// The request's JSON was parsed within a depth limit, which bounds the recursion.
uint8_t types_of(const json& schema) {
  if (!schema.is_object()) return kJsonAny;
  auto union_of = [](const json& list, auto&& type) -> uint8_t {
    uint8_t all = 0;
    for (const json& item : list) {
      const uint8_t t = type(item);
      if (t == kJsonAny) return kJsonAny;
      all |= t;
    }
    return all;
  };
  if (schema.contains("type")) {
    const json& type = schema["type"];
    return type.is_array() ? union_of(type, type_named) : type_named(type);
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    return union_of(schema["enum"], type_of_value);
  }
  if (schema.contains("const")) return type_of_value(schema["const"]);
  for (const char* key : {"anyOf", "oneOf"}) {
    if (schema.contains(key) && schema[key].is_array()) {
      return union_of(schema[key], [](const json& s) { return types_of(s); });
    }
  }
  return kJsonAny;
}

std::string quoted(std::string_view text) {
  std::string out(1, '"');
  out += json_escaped(text);
  out += '"';
  return out;
}

// The type of a valid JSON text, from its first character.
uint8_t type_of_text(std::string_view t) {
  switch (t.front()) {
    case '"':
      return kJsonString;
    case '{':
      return kJsonObject;
    case '[':
      return kJsonArray;
    case 't':
    case 'f':
      return kJsonBoolean;
    case 'n':
      return kJsonNull;
    default:
      return kJsonNumber;
  }
}

}  // namespace

uint8_t ParameterTypes::of(std::string_view function, std::string_view parameter) const {
  const auto f = functions.find(function);
  if (f == functions.end()) return kJsonAny;
  const auto p = f->second.find(parameter);
  return p == f->second.end() ? kJsonAny : p->second;
}

std::shared_ptr<const ParameterTypes> parameter_types(const json& tools) {
  auto out = std::make_shared<ParameterTypes>();
  if (!tools.is_array()) return out;
  for (const json& tool : tools) {
    if (!tool.is_object() || !tool.contains("function")) continue;
    const json& f = tool["function"];
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
    auto& parameters = out->functions[f["name"].get<std::string>()];
    if (!f.contains("parameters") || !f["parameters"].is_object()) continue;
    const json& p = f["parameters"];
    if (!p.contains("properties") || !p["properties"].is_object()) continue;
    for (const auto& [name, schema] : p["properties"].items()) {
      parameters[name] = types_of(schema);
    }
  }
  return out;
}

std::string typed_value(std::string_view raw, uint8_t types) {
  if (types == kJsonString) return quoted(raw);
  const std::string_view t = trim(raw);
  if (types != kJsonAny) {
    // Python's str() of a value, as Qwen's templates print them into the history.
    if ((types & kJsonBoolean) && (t == "True" || t == "False")) {
      return t == "True" ? "true" : "false";
    }
    if ((types & kJsonNull) && t == "None") return "null";
  }
  if (!t.empty() && http::json_problem(t).empty()) {
    const uint8_t type = type_of_text(t);
    if (types == kJsonAny || (types & type)) {
      ArgumentsText compact;
      for (char c : t) compact.add(c);
      return compact.text();
    }
  }
  return quoted(raw);
}

void TypedArguments::open(ReadCall& call) {
  call.arguments.assign(1, '{');
  call.has_arguments = true;
}

void TypedArguments::begin(ReadCall& call, std::string_view key, uint8_t types) {
  if (in_value_) end(call);
  if (!first_) call.arguments += ',';
  first_ = false;
  call.arguments += quoted(key);
  call.arguments += ':';
  types_ = types;
  streamed_ = types == kJsonString;
  if (streamed_) call.arguments += '"';
  in_value_ = true;
  at_start_ = true;
  held_newline_ = false;
  raw_.clear();
}

void TypedArguments::add(ReadCall& call, std::string_view text) {
  if (!in_value_ || text.empty()) return;
  if (trim_newline_ && at_start_ && text.front() == '\n') text.remove_prefix(1);
  at_start_ = false;
  if (!streamed_) {
    raw_ += text;
    return;
  }
  if (text.empty()) return;
  if (held_newline_) call.arguments += "\\n";
  held_newline_ = trim_newline_ && text.back() == '\n';
  if (held_newline_) text.remove_suffix(1);
  call.arguments += json_escaped(text);
}

void TypedArguments::end(ReadCall& call) {
  if (!in_value_) return;
  in_value_ = false;
  if (streamed_) {
    call.arguments += '"';  // a held newline was the closing's
    return;
  }
  std::string_view raw(raw_);
  if (trim_newline_ && raw.ends_with('\n')) raw.remove_suffix(1);
  call.arguments += typed_value(raw, types_);
}

void TypedArguments::close(ReadCall& call) {
  end(call);
  call.arguments += '}';
  call.done = true;
}

}  // namespace herd::server
