// JsonGrammar: JSON Schemas compiled into the graph that JsonConstraint walks while a reply
// is generated (structured outputs, and the arguments of forced tool calls).
//
// The supported subset (anything else is a SchemaError naming the keyword):
//   type            "object" "array" "string" "number" "integer" "boolean" "null", or a list
//   properties      at most 64 per object; keys are written as JSON.dump writes them
//   required        names among `properties`
//   additionalProperties   false, true, absent (= true) or a schema
//   items           one schema for every element
//   minItems maxItems
//   enum const      values written exactly as compact JSON (1.5, "a", {"k":1})
//   anyOf oneOf     alternatives (oneOf is read as anyOf); no sibling validation keywords
//   $ref            "#/$defs/NAME" or "#/definitions/NAME" of the schema's root
//   annotations     title description default examples $schema $id $comment deprecated
//                   readOnly writeOnly $defs definitions: ignored
// Without `type`, `properties`/`required`/`additionalProperties` imply an object and
// `items`/`minItems`/`maxItems` an array; a schema with none of them allows any value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace herd::server {

// What a schema asks for that herd cannot enforce, or a malformed schema. path: where, as
// dotted field names from the schema's root (e.g. "properties.when.format").
class SchemaError : public Error {
 public:
  SchemaError(std::string path, const std::string& message)
      : Error("server", message), path_(std::move(path)), message_(message) {}
  const std::string& path() const { return path_; }
  const std::string& message() const { return message_; }

 private:
  std::string path_, message_;
};

// Bits of SchemaNode::types.
enum JsonType : uint8_t {
  kTypeObject = 1,
  kTypeArray = 2,
  kTypeString = 4,
  kTypeNumber = 8,  // integers included
  kTypeInteger = 16,
  kTypeBoolean = 32,
  kTypeNull = 64,
  kTypeAny = 127,
};

struct SchemaNode {
  uint8_t types = kTypeAny;
  // Compact JSON texts, sorted. With `enumerated` (enum/const) the value is one of them;
  // otherwise they are the allowed ones of false, null, true.
  std::vector<std::string> literals;
  bool enumerated = false;
  // Objects. key: the name as compact JSON text, quotes included. Sorted by key; a
  // property's index here is its bit in `required` and in a reply's seen set.
  struct Property {
    std::string key;
    int32_t node = -1;
  };
  std::vector<Property> properties;
  uint64_t required = 0;
  int32_t additional = -1;  // node of the values of other keys; -1: no other keys
  // Arrays.
  int32_t items = -1;
  int64_t min_items = 0;
  int64_t max_items = -1;  // < 0: unbounded
  // anyOf / oneOf / $ref: the value is one of these nodes' values instead (and the fields
  // above are unused).
  std::vector<int32_t> alternatives;
};

class JsonGrammar {
 public:
  static constexpr size_t kMaxProperties = 64;  // one bit each in a 64-bit set
  static constexpr size_t kMaxNodes = 20000;    // all schemas of one grammar together

  JsonGrammar();
  JsonGrammar(JsonGrammar&&) noexcept = default;
  JsonGrammar& operator=(JsonGrammar&&) noexcept = default;

  // Compiles `schema` into this grammar and returns its root node. Throws SchemaError.
  int32_t add_schema(const nlohmann::ordered_json& schema);
  // A node for the objects among `node`'s values (a function's parameters: `{}` means any
  // object there, not any value). New nodes: nodes shared with other schema parts stay as
  // they are. Throws SchemaError when it allows no object.
  int32_t objects_of(int32_t node);
  // The node of any JSON value, and of any JSON object (json_object mode).
  int32_t any_value() const { return 0; }
  int32_t any_object() const { return 1; }

  // A reply starts with `prefix` (copied exactly) and then a value of `node`. A grammar
  // has at least one start; several are alternatives (a forced call's possible names).
  struct Start {
    std::string prefix;
    int32_t node = 0;
  };
  void add_start(std::string prefix, int32_t node) { starts_.push_back({std::move(prefix), node}); }

  const std::vector<Start>& starts() const { return starts_; }
  const SchemaNode& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t n_nodes() const { return nodes_.size(); }

 private:
  int32_t new_node();
  int32_t compile(const nlohmann::ordered_json& schema, const std::string& path, int depth);
  void compile_object(const nlohmann::ordered_json& schema, const std::string& path, int depth,
                      int32_t id);
  int32_t reference(const std::string& ref, const std::string& path);
  int32_t objects_or_none(int32_t node);  // objects_of, or -1 when it allows none
  void check_alternatives_acyclic() const;

  std::vector<SchemaNode> nodes_;
  std::vector<Start> starts_;
  // While one schema compiles: its root (for $ref) and the definitions compiled so far.
  const nlohmann::ordered_json* root_ = nullptr;
  std::vector<std::pair<std::string, int32_t>> refs_;
  struct PendingRef {
    const nlohmann::ordered_json* definition;
    int32_t node;
    std::string path;
  };
  std::vector<PendingRef> pending_refs_;
};

}  // namespace herd::server
