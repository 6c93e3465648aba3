#include "server/json_schema.h"

#include <gtest/gtest.h>

#include <string>

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

// The path of the SchemaError that compiling `schema` throws ("" when it compiles).
std::string refusal(const std::string& schema) {
  JsonGrammar g;
  try {
    g.add_schema(json::parse(schema));
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("[server]"), std::string::npos);
    return e.path();
  }
  return "compiles";
}

TEST(JsonSchema, TheSubsetCompiles) {
  EXPECT_EQ(refusal(R"({"type": "object", "title": "T", "description": "d",
      "properties": {"a": {"type": ["string", "null"], "default": null},
                     "b": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                     "c": {"enum": ["x", "y"]}, "d": {"const": 3},
                     "e": {"anyOf": [{"type": "integer"}, {"$ref": "#/definitions/e"}]}},
      "required": ["a"], "additionalProperties": false,
      "definitions": {"e": {"type": "boolean"}}})"),
            "compiles");
  EXPECT_EQ(refusal("true"), "compiles");
  EXPECT_EQ(refusal("{}"), "compiles");
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_EQ(refusal(R"({"type": "string", "format": "date-time"})"), "format");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"n": {"type": "integer",
      "minimum": 0}}})"),
            "properties.n.minimum");
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "^a"})"), "pattern");
  EXPECT_EQ(refusal(R"({"allOf": [{}]})"), "allOf");
  EXPECT_EQ(refusal(R"({"type": "array", "items": [{}, {}]})"), "items");
  EXPECT_EQ(refusal(R"({"type": "object", "anyOf": [{}]})"), "anyOf");
  EXPECT_EQ(refusal(R"({"$ref": "http://example.com/s.json"})"), "$ref");
  EXPECT_EQ(refusal(R"({"$ref": "#/$defs/missing"})"), "$ref");
  EXPECT_EQ(refusal(R"({"type": "text"})"), "type");
  EXPECT_EQ(refusal(R"({"type": "object", "required": ["x"]})"), "required");
  EXPECT_EQ(refusal(R"({"enum": []})"), "enum");
  EXPECT_EQ(refusal(R"({"type": "string", "enum": [1, 2]})"), "enum");
  EXPECT_EQ(refusal(R"({"type": "array", "minItems": 3, "maxItems": 2})"), "minItems");
  EXPECT_EQ(refusal("false"), "");  // not an object: refused, at the root
  EXPECT_EQ(refusal("3"), "");
}

TEST(JsonSchema, HostileSchemasAreRefusedNotFollowed) {
  // A definition that is only itself never reaches a value.
  EXPECT_EQ(refusal(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})"), "$ref");
  EXPECT_EQ(refusal(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]},
      "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})"),
            "$ref");
  // A long chain of definitions compiles without deep recursion, and is refused.
  json chain = {{"$ref", "#/$defs/d0"}, {"$defs", json::object()}};
  // Names built with std::string (GCC 12 warns, a false positive, on "d" + std::to_string).
  auto def = [](int i) { return std::string("d").append(std::to_string(i)); };
  for (int i = 0; i < 5000; ++i) {
    chain["$defs"][def(i)] = {{"$ref", std::string("#/$defs/").append(def(i + 1))}};
  }
  chain["$defs"]["d5000"] = {{"type", "null"}};
  JsonGrammar g;
  EXPECT_THROW(g.add_schema(chain), SchemaError);
  // Recursion through values is fine: the constraint bounds the nesting.
  EXPECT_EQ(refusal(R"({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
      "$ref": "#/$defs/t"})"),
            "compiles");
  // Too many properties for one object.
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 65; ++i) {
    wide["properties"][std::string("p").append(std::to_string(i))] = json::object();
  }
  JsonGrammar w;
  EXPECT_THROW(w.add_schema(wide), SchemaError);
}

}  // namespace
}  // namespace herd::server
