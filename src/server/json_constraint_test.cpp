#include "server/json_constraint.h"

#include <gtest/gtest.h>

#include <string>

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

JsonGrammar grammar_of(const std::string& schema) {
  JsonGrammar g;
  g.add_start("", g.add_schema(json::parse(schema)));
  return g;
}

// Whether `text` is a valid prefix of a reply, and whether it is a whole one.
struct Fed {
  bool alive;
  bool complete;
  bool can_end;
};
Fed feed(const JsonGrammar& g, std::string_view text) {
  JsonConstraint c(g);
  const bool alive = c.push(text);
  return {alive, c.complete(), c.can_end()};
}

void expect_whole(const JsonGrammar& g, std::string_view text) {
  const Fed f = feed(g, text);
  EXPECT_TRUE(f.alive && f.can_end) << text;
}
void expect_prefix(const JsonGrammar& g, std::string_view text) {
  const Fed f = feed(g, text);
  EXPECT_TRUE(f.alive) << text;
  EXPECT_FALSE(f.can_end) << text;
}
void expect_refused(const JsonGrammar& g, std::string_view text) {
  EXPECT_FALSE(feed(g, text).alive) << text;
}

TEST(JsonConstraint, AnyObject) {
  JsonGrammar g;
  g.add_start("", g.any_object());
  expect_whole(g, "{}");
  expect_whole(g, R"({"a": [1, -2.5e+3, true, null, {"b": "c"}], "d": {}})");
  expect_whole(g, "{\n  \"a\": 1\n}");
  EXPECT_TRUE(feed(g, "{}").complete);
  expect_prefix(g, R"({"a": [1, )");
  expect_refused(g, "[]");        // the root must be an object
  expect_refused(g, "{} ");       // nothing after the value
  expect_refused(g, "{'a': 1}");  // JSON, not JavaScript
  expect_refused(g, R"({"a" 1})");
  expect_refused(g, R"({"a": 1,})");
  expect_refused(g, R"({"a": [1,]})");
  expect_refused(g, R"({"a": tru })");
  expect_refused(g, R"({"a": nul)"
                    "\x01");
}

TEST(JsonConstraint, Numbers) {
  const JsonGrammar g = grammar_of(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "12", "1.5", "-1.25e10", "1E-3", "0.0", "3e+7"}) {
    expect_whole(g, ok);
    EXPECT_FALSE(feed(g, ok).complete) << ok;  // a root number may always grow
  }
  for (const char* partial : {"-", "1.", "1e", "1e+"}) expect_prefix(g, partial);
  for (const char* bad : {"01", "+1", ".5", "1.e3", "--1", "1e5.", "0x1", "1..2"}) {
    expect_refused(g, bad);
  }
  expect_refused(g, std::string(JsonConstraint::kMaxNumberChars + 1, '1'));
  const JsonGrammar integer = grammar_of(R"({"type": "integer"})");
  expect_whole(integer, "-42");
  expect_refused(integer, "4.2");
  expect_refused(integer, "4e2");
}

TEST(JsonConstraint, StringsEscapesAndUnicode) {
  const JsonGrammar g = grammar_of(R"({"type": "string"})");
  expect_whole(g, R"("plain")");
  expect_whole(g, R"("esc \" \\ \/ \b \f \n \r \t")");
  expect_whole(g, R"("\u00e9\u20AC")");
  expect_whole(g, R"("\ud83d\ude00")");  // a surrogate pair
  expect_whole(g, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_TRUE(feed(g, R"("x")").complete);
  expect_prefix(g, R"("\u00)");
  expect_prefix(g, R"("\ud83d)");
  expect_refused(g, R"("\x")");
  expect_refused(g, R"("\u00g0")");
  expect_refused(g, R"("\ude00")");  // a low surrogate alone
  expect_refused(g, R"("\ud83d")");  // a high surrogate alone
  expect_refused(g, R"("\ud83dx")");
  expect_refused(g, R"("\ud83d\u0041")");     // not followed by a low surrogate
  expect_refused(g, "\"a\nb\"");              // raw control character
  expect_refused(g, "\"\xc0\xaf\"");          // overlong
  expect_refused(g, "\"\xed\xa0\x80\"");      // a surrogate in UTF-8
  expect_refused(g, "\"\xf4\x90\x80\x80\"");  // above U+10FFFF
  expect_refused(g, "\"\x80\"");              // a lone continuation byte
  expect_refused(g, "\"\xe2\x82\"");          // a character cut short
}

TEST(JsonConstraint, PropertiesRequiredAndAdditional) {
  const JsonGrammar g = grammar_of(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "nick": {"type": "string"}},
      "required": ["name", "age"], "additionalProperties": false})");
  expect_whole(g, R"({"name": "Ann", "age": 3})");
  expect_whole(g, R"({"age": 3, "nick": "a", "name": "Ann"})");
  expect_refused(g, R"({"name": "Ann"})");  // "age" is required
  expect_refused(g, R"({"name": 1)");
  expect_refused(g, R"({"other")");
  expect_refused(g, R"({"nam")"
                    "\"");
  expect_refused(g, R"({"name": "a", "name")");                   // a key twice
  expect_refused(g, R"({"name": "a", "age": 1, "nick": "b", )");  // no key left
  expect_prefix(g, R"({"na)");

  const JsonGrammar open = grammar_of(R"({"type": "object", "properties": {
      "a": {"type": "integer"}}, "required": ["a"]})");
  expect_whole(open, R"({"a": 1, "ab": "anything", "b": [null]})");
  expect_refused(open, R"({"a": "x")");  // a declared key keeps its schema
  expect_refused(open, R"({"ab": 1, "a": 1, "a")");

  const JsonGrammar typed = grammar_of(R"({"type": "object",
      "additionalProperties": {"type": "boolean"}})");
  expect_whole(typed, R"({"x": true, "y": false})");
  expect_refused(typed, R"({"x": 1)");
}

TEST(JsonConstraint, ArraysWithItemBounds) {
  const JsonGrammar g = grammar_of(
      R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  expect_whole(g, "[1]");
  expect_whole(g, "[1, 2, 3]");
  expect_refused(g, "[]");
  expect_refused(g, "[1, 2, 3, ");
  expect_refused(g, "[\"a\"");
  expect_prefix(g, "[1,");
}

TEST(JsonConstraint, EnumConstAndTypeLists) {
  const JsonGrammar g = grammar_of(R"({"type": "object", "properties": {
      "unit": {"enum": ["celsius", "fahrenheit"]}, "n": {"enum": [1, 10, 2.5]},
      "v": {"const": {"k": [1]}}, "maybe": {"type": ["string", "null"]}},
      "required": ["unit", "n", "v", "maybe"]})");
  expect_whole(g, R"({"unit": "celsius", "n": 10, "v": {"k":[1]}, "maybe": null})");
  expect_whole(g, R"({"unit": "fahrenheit", "n": 1, "v": {"k":[1]}, "maybe": "x"})");
  expect_refused(g, R"({"unit": "kelvin")");
  expect_refused(g, R"({"unit": "celsius", "n": 3)");
  expect_refused(g, R"({"unit": "celsius", "n": 100)");
  expect_refused(g, R"({"unit": "celsius", "n": 1, "v": {"k": [1]})");  // not compact
  expect_refused(g, R"({"unit": "celsius", "n": 1, "v": {"k":[1]}, "maybe": 1)");
  // An enum root is whole at its last byte; a number enum may grow ("1" of 1 and 10).
  const JsonGrammar root = grammar_of(R"({"enum": ["a", 1, 10]})");
  EXPECT_TRUE(feed(root, R"("a")").complete);
  expect_whole(root, "1");
  EXPECT_FALSE(feed(root, "1").complete);
  EXPECT_TRUE(feed(root, "10").complete);
}

TEST(JsonConstraint, AnyOfRefsAndRecursion) {
  const JsonGrammar g = grammar_of(R"({
    "$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"], "additionalProperties": false}},
    "anyOf": [{"$ref": "#/$defs/node"}, {"type": "string"}, {"type": "null"}]})");
  expect_whole(g, R"({"value": 1, "children": [{"value": 2}, {"value": 3, "children": []}]})");
  expect_whole(g, R"("leaf")");
  expect_whole(g, "null");
  expect_refused(g, "1");
  expect_refused(g, R"({"value": 1, "children": [{"other": 2}]})");
}

TEST(JsonConstraint, NestingIsBounded) {
  JsonGrammar g;
  g.add_start("", g.any_value());
  JsonConstraint c(g);
  std::string deep(JsonConstraint::kMaxNesting, '[');
  EXPECT_TRUE(c.push(deep));
  EXPECT_FALSE(c.push('['));  // one level too many
  EXPECT_LE(c.max_depth(), JsonConstraint::kMaxNesting + 1);
  // A schema that can only be satisfied deeper than the limit is refused at the limit.
  const JsonGrammar chain = grammar_of(R"({"$defs": {"a": {"type": "object",
      "properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}}, "$ref": "#/$defs/a"})");
  JsonConstraint d(chain);
  std::string text;
  for (size_t i = 0; i < JsonConstraint::kMaxNesting; ++i) text += R"({"a": )";
  EXPECT_TRUE(d.push(text));
  EXPECT_FALSE(d.push('{'));
}

TEST(JsonConstraint, WhitespaceRunsAreCapped) {
  JsonGrammar g;
  g.add_start("", g.any_object());
  expect_prefix(g, "{" + std::string(JsonConstraint::kMaxWhitespace, ' '));
  expect_refused(g, "{" + std::string(JsonConstraint::kMaxWhitespace + 1, ' '));
  expect_whole(g, "{\"a\"" + std::string(JsonConstraint::kMaxWhitespace, ' ') + ":1}");
}

TEST(JsonConstraint, StartsWithPrefixAlternatives) {
  JsonGrammar g;
  const int32_t weather = g.add_schema(json::parse(R"({"type": "object", "properties":
      {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})"));
  const int32_t time = g.add_schema(json::parse(R"({"type": "object", "properties":
      {"zone": {"type": "integer"}}, "required": ["zone"], "additionalProperties": false})"));
  g.add_start(R"(get_weather", "arguments": )", weather);
  g.add_start(R"(get_time", "arguments": )", time);
  expect_whole(g, R"(get_weather", "arguments": {"city": "Paris"})");
  expect_whole(g, R"(get_time", "arguments": {"zone": 2})");
  expect_refused(g, R"(get_weather", "arguments": {"zone": 2})");
  expect_refused(g, R"(get_other")");
  expect_prefix(g, "get_");
}

TEST(JsonConstraint, ObjectsOfASchema) {
  JsonGrammar g;
  g.add_start("", g.objects_of(g.add_schema(json::parse("{}"))));
  g.add_start("", g.objects_of(g.add_schema(json::parse(R"({"anyOf": [{"type": "null"},
      {"type": "object", "properties": {"a": {"type": "null"}}}]})"))));
  expect_whole(g, R"({"a": null})");
  expect_refused(g, "null");
  expect_refused(g, "1");
  JsonGrammar none;
  EXPECT_THROW(none.objects_of(none.add_schema(json::parse(R"({"type": "string"})"))), SchemaError);
  // A shared node keeps its values: any value is still any value elsewhere.
  JsonGrammar shared;
  shared.add_start("", shared.objects_of(shared.any_value()));
  shared.add_start("x", shared.any_value());
  expect_whole(shared, "x1");
}

TEST(JsonConstraint, CopiesAreIndependent) {
  JsonGrammar g;
  g.add_start("", g.any_object());
  JsonConstraint a(g);
  a.push(std::string_view(R"({"a": )"));
  JsonConstraint b = a;
  EXPECT_TRUE(b.push(std::string_view("1}")));
  EXPECT_TRUE(b.complete());
  EXPECT_FALSE(a.complete());
  EXPECT_TRUE(a.push(std::string_view("[]}")));
}

}  // namespace
}  // namespace herd::server
