#include "server/json_schema.h"

#include <algorithm>
#include <array>
#include <functional>
#include <span>

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

// Deeper schemas are refused (compilation recurses over them); requests are already cut at
// 64 levels, this holds for schemas from elsewhere too.
constexpr int kMaxSchemaDepth = 64;
// The longest chain of anyOf / $ref hops before a value: the constraint forks through
// them recursively at a value's first character.
constexpr int kMaxAlternativeChain = 16;

constexpr std::array<std::string_view, 13> kAnnotations = {
    "title", "description", "default",  "examples",  "$schema",    "$id",    "$comment",
    "$defs", "definitions", "readOnly", "writeOnly", "deprecated", "$anchor"};
constexpr std::array<std::string_view, 12> kSupported = {
    "type",  "properties", "required", "additionalProperties",
    "items", "minItems",   "maxItems", "enum",
    "const", "anyOf",      "oneOf",    "$ref"};

bool is_one_of(std::string_view key, std::span<const std::string_view> set) {
  return std::find(set.begin(), set.end(), key) != set.end();
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw SchemaError(path, message);
}

uint8_t type_bit(const json& name, const std::string& path) {
  static const std::array<std::pair<std::string_view, uint8_t>, 7> kNames = {{
      {"object", kTypeObject},
      {"array", kTypeArray},
      {"string", kTypeString},
      {"number", kTypeNumber | kTypeInteger},
      {"integer", kTypeInteger},
      {"boolean", kTypeBoolean},
      {"null", kTypeNull},
  }};
  if (name.is_string()) {
    for (const auto& [n, bit] : kNames) {
      if (name.get<std::string>() == n) return bit;
    }
  }
  fail(path, "'type' " + name.dump() + " (at " + path + ") is not a JSON Schema type");
}

// The type bits a value has (for enum values against `type`).
uint8_t value_type(const json& v) {
  if (v.is_object()) return kTypeObject;
  if (v.is_array()) return kTypeArray;
  if (v.is_string()) return kTypeString;
  if (v.is_number_integer()) return kTypeInteger;
  if (v.is_number()) return kTypeNumber;
  if (v.is_boolean()) return kTypeBoolean;
  return kTypeNull;
}

int64_t count(const json& schema, const char* key, const std::string& path) {
  const json& v = schema[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    fail(join(path, key),
         std::string("'") + key + "' (at " + path + ") must be a non-negative integer");
  }
  return v.get<int64_t>();
}

}  // namespace

JsonGrammar::JsonGrammar() {
  SchemaNode any;
  any.literals = {"false", "null", "true"};
  any.additional = 0;
  any.items = 0;
  nodes_.push_back(any);
  SchemaNode object;
  object.types = kTypeObject;
  object.additional = 0;
  nodes_.push_back(object);
}

int32_t JsonGrammar::new_node() {
  if (nodes_.size() >= kMaxNodes) {
    fail("", "the schemas have more than " + std::to_string(kMaxNodes) + " parts");
  }
  nodes_.emplace_back();
  return static_cast<int32_t>(nodes_.size() - 1);
}

int32_t JsonGrammar::add_schema(const json& schema) {
  root_ = &schema;
  refs_.clear();
  pending_refs_.clear();
  const int32_t root = compile(schema, "", 0);
  // Definitions reached by $ref compile here, one after another, not inside each other:
  // a long chain of definitions cannot deepen the recursion.
  while (!pending_refs_.empty()) {
    const auto [definition, id, path] = pending_refs_.back();
    pending_refs_.pop_back();
    const int32_t compiled = compile(*definition, path, 0);
    nodes_[static_cast<size_t>(id)].alternatives = {compiled};
  }
  root_ = nullptr;
  check_alternatives_acyclic();
  return root;
}

int32_t JsonGrammar::objects_of(int32_t id) {
  const int32_t objects = objects_or_none(id);
  if (objects < 0) fail("type", "the schema allows no JSON object");
  return objects;
}

int32_t JsonGrammar::objects_or_none(int32_t id) {
  if (id == any_value()) return any_object();
  SchemaNode n = nodes_[static_cast<size_t>(id)];
  if (!n.alternatives.empty()) {
    // Acyclic and at most 16 deep (checked when they compiled).
    std::vector<int32_t> alternatives;
    for (int32_t alternative : n.alternatives) {
      const int32_t objects = objects_or_none(alternative);
      if (objects >= 0) alternatives.push_back(objects);
    }
    if (alternatives.empty()) return -1;
    n.alternatives = std::move(alternatives);
  } else {
    if (n.enumerated) {
      std::erase_if(n.literals, [](const std::string& l) { return !l.starts_with('{'); });
    } else {
      n.literals.clear();
    }
    n.types &= kTypeObject;
    if (n.types == 0 || (n.enumerated && n.literals.empty())) return -1;
  }
  const int32_t copy = new_node();
  nodes_[static_cast<size_t>(copy)] = std::move(n);
  return copy;
}

int32_t JsonGrammar::reference(const std::string& ref, const std::string& path) {
  for (const auto& [name, id] : refs_) {
    if (name == ref) return id;
  }
  std::string_view rest(ref);
  const char* section = nullptr;
  if (rest.starts_with("#/$defs/")) {
    section = "$defs";
  } else if (rest.starts_with("#/definitions/")) {
    section = "definitions";
  } else {
    fail(path, "'$ref' \"" + ref + "\" (at " + path +
                   ") is not supported: only #/$defs/NAME and #/definitions/NAME");
  }
  rest.remove_prefix(std::string_view(section).size() + 3);
  // A JSON pointer token: ~1 is '/', ~0 is '~'.
  std::string name;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '~' && i + 1 < rest.size() && (rest[i + 1] == '0' || rest[i + 1] == '1')) {
      name += rest[i + 1] == '0' ? '~' : '/';
      ++i;
    } else if (rest[i] == '/') {
      fail(path, "'$ref' \"" + ref + "\" (at " + path + ") points inside a definition");
    } else {
      name += rest[i];
    }
  }
  const json& root = *root_;
  if (!root.is_object() || !root.contains(section) || !root[section].is_object() ||
      !root[section].contains(name)) {
    fail(path, "'$ref' \"" + ref + "\" (at " + path + ") names no definition");
  }
  const int32_t id = new_node();
  refs_.emplace_back(ref, id);
  pending_refs_.push_back({&root[section][name], id, std::string(section) + "." + name});
  return id;
}

int32_t JsonGrammar::compile(const json& schema, const std::string& path, int depth) {
  const std::string where = path.empty() ? "the schema's root" : path;
  if (depth > kMaxSchemaDepth) {
    fail(path, "the schema nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
  }
  if (schema.is_boolean() && schema.get<bool>()) return any_value();
  if (!schema.is_object()) fail(path, "the schema at " + where + " must be an object");
  bool validates = false;  // keywords beside anyOf/oneOf/$ref that would constrain the value
  for (const auto& [key, value] : schema.items()) {
    if (is_one_of(key, kAnnotations)) continue;
    if (!is_one_of(key, kSupported)) {
      fail(join(path, key), "'" + key + "' (at " + where +
                                ") is not supported; herd's structured outputs support type, "
                                "properties, required, additionalProperties, items, minItems, "
                                "maxItems, enum, const, anyOf, oneOf and $ref to $defs");
    }
    if (key != "anyOf" && key != "oneOf" && key != "$ref") validates = true;
  }
  const int32_t id = new_node();
  const char* choice = schema.contains("anyOf")   ? "anyOf"
                       : schema.contains("oneOf") ? "oneOf"
                       : schema.contains("$ref")  ? "$ref"
                                                  : nullptr;
  if (choice != nullptr) {
    const int n_choices =
        schema.contains("anyOf") + schema.contains("oneOf") + schema.contains("$ref");
    if (validates || n_choices > 1) {
      fail(join(path, choice), std::string("'") + choice + "' (at " + where +
                                   ") beside other validation keywords is not supported; "
                                   "move them into each alternative");
    }
    std::vector<int32_t> alternatives;
    if (std::string_view(choice) == "$ref") {
      if (!schema["$ref"].is_string()) fail(join(path, "$ref"), "'$ref' must be a string");
      alternatives.push_back(reference(schema["$ref"].get<std::string>(), join(path, "$ref")));
    } else {
      const json& list = schema[choice];
      if (!list.is_array() || list.empty()) {
        fail(join(path, choice), std::string("'") + choice + "' (at " + where +
                                     ") must be a non-empty array of schemas");
      }
      for (size_t i = 0; i < list.size(); ++i) {
        alternatives.push_back(
            compile(list[i], join(path, choice) + "[" + std::to_string(i) + "]", depth + 1));
      }
    }
    nodes_[static_cast<size_t>(id)].alternatives = std::move(alternatives);
    return id;
  }
  compile_object(schema, path, depth, id);
  return id;
}

// Everything but the alternatives: type, literals, object and array keywords.
void JsonGrammar::compile_object(const json& schema, const std::string& path, int depth,
                                 int32_t id) {
  const std::string where = path.empty() ? "the schema's root" : path;
  SchemaNode n;
  const bool object_keys = schema.contains("properties") || schema.contains("required") ||
                           schema.contains("additionalProperties");
  const bool array_keys =
      schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems");
  if (schema.contains("type")) {
    const json& type = schema["type"];
    n.types = 0;
    if (type.is_array()) {
      if (type.empty()) fail(join(path, "type"), "'type' (at " + where + ") is an empty list");
      for (const json& t : type) n.types |= type_bit(t, join(path, "type"));
    } else {
      n.types = type_bit(type, join(path, "type"));
    }
  } else if (object_keys || array_keys) {
    n.types = (object_keys ? kTypeObject : 0) | (array_keys ? kTypeArray : 0);
  }

  if (schema.contains("enum") || schema.contains("const")) {
    if (object_keys || array_keys) {
      fail(join(path, "enum"),
           "'enum'/'const' (at " + where + ") beside object or array keywords is not supported");
    }
    if (schema.contains("enum") && schema.contains("const")) {
      fail(join(path, "const"), "'enum' and 'const' together (at " + where + ")");
    }
    json values = schema.contains("const") ? json::array({schema["const"]}) : schema["enum"];
    if (!values.is_array() || values.empty()) {
      fail(join(path, "enum"), "'enum' (at " + where + ") must be a non-empty array");
    }
    for (const json& v : values) {
      if (value_type(v) & n.types) n.literals.push_back(v.dump());
    }
    if (n.literals.empty()) {
      fail(join(path, "enum"), "no 'enum'/'const' value (at " + where + ") has the 'type'");
    }
    std::sort(n.literals.begin(), n.literals.end());
    n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    n.enumerated = true;
    nodes_[static_cast<size_t>(id)] = std::move(n);
    return;
  }
  if (n.types & kTypeBoolean) n.literals.push_back("false");
  if (n.types & kTypeNull) n.literals.push_back("null");
  if (n.types & kTypeBoolean) n.literals.push_back("true");

  n.additional = any_value();
  if (schema.contains("properties")) {
    const json& properties = schema["properties"];
    if (!properties.is_object()) {
      fail(join(path, "properties"), "'properties' (at " + where + ") must be an object");
    }
    if (properties.size() > kMaxProperties) {
      fail(join(path, "properties"), "an object (at " + where + ") has more than " +
                                         std::to_string(kMaxProperties) + " properties");
    }
    for (const auto& [name, sub] : properties.items()) {
      const int32_t child = compile(sub, join(join(path, "properties"), name), depth + 1);
      n.properties.push_back({json(name).dump(), child});
    }
    std::sort(
        n.properties.begin(), n.properties.end(),
        [](const SchemaNode::Property& a, const SchemaNode::Property& b) { return a.key < b.key; });
  }
  if (schema.contains("required")) {
    const json& required = schema["required"];
    if (!required.is_array()) {
      fail(join(path, "required"), "'required' (at " + where + ") must be an array of names");
    }
    for (const json& name : required) {
      const std::string key = name.is_string() ? name.dump() : std::string();
      auto it = std::find_if(n.properties.begin(), n.properties.end(),
                             [&](const SchemaNode::Property& p) { return p.key == key; });
      if (it == n.properties.end()) {
        fail(join(path, "required"), "'required' names " + name.dump() + " (at " + where +
                                         "), which is not in 'properties'");
      }
      n.required |= uint64_t{1} << (it - n.properties.begin());
    }
  }
  if (schema.contains("additionalProperties")) {
    const json& additional = schema["additionalProperties"];
    if (additional.is_boolean()) {
      n.additional = additional.get<bool>() ? any_value() : -1;
    } else {
      n.additional = compile(additional, join(path, "additionalProperties"), depth + 1);
    }
  }
  n.items = any_value();
  if (schema.contains("items")) {
    if (schema["items"].is_array()) {
      fail(join(path, "items"), "'items' as a list of schemas (at " + where +
                                    ") is not supported; give one schema for every element");
    }
    n.items = compile(schema["items"], join(path, "items"), depth + 1);
  }
  if (schema.contains("minItems")) n.min_items = count(schema, "minItems", path);
  if (schema.contains("maxItems")) n.max_items = count(schema, "maxItems", path);
  if (n.max_items >= 0 && n.min_items > n.max_items) {
    fail(join(path, "minItems"), "'minItems' is above 'maxItems' (at " + where + ")");
  }
  nodes_[static_cast<size_t>(id)] = std::move(n);
}

// Alternatives are followed before any character is read: a cycle among them ($defs/a being
// {"$ref": "#/$defs/a"}) would never reach a value, and a long chain would recurse deeply.
void JsonGrammar::check_alternatives_acyclic() const {
  // chain[n]: -1 unvisited, -2 on the current path, else the longest chain below n.
  std::vector<int> chain(nodes_.size(), -1);
  auto too_long = [] {
    fail("$ref", "the schema chains more than " + std::to_string(kMaxAlternativeChain) +
                     " anyOf/$ref levels without a value between them");
  };
  std::function<int(int32_t, int)> visit = [&](int32_t id, int depth) -> int {
    int& c = chain[static_cast<size_t>(id)];
    if (c == -2) fail("$ref", "the schema's $ref/anyOf alternatives form a cycle");
    if (c >= 0) return c;
    if (depth > kMaxAlternativeChain) too_long();
    c = -2;
    int longest = 0;
    for (int32_t alt : nodes_[static_cast<size_t>(id)].alternatives) {
      longest = std::max(longest, visit(alt, depth + 1) + 1);
    }
    if (longest > kMaxAlternativeChain) too_long();
    chain[static_cast<size_t>(id)] = longest;
    return longest;
  };
  for (size_t i = 0; i < nodes_.size(); ++i) visit(static_cast<int32_t>(i), 0);
}

}  // namespace herd::server
