// Arguments written as text, one parameter at a time (Qwen3-Coder's XML, GLM's
// <arg_key>/<arg_value>), made a JSON object while they stream.
//
// Such formats write every value as raw text: a string as itself, a number or an object as
// its JSON. Which it was is read from the tool's JSON schema in the request:
//   - a parameter whose schema allows only strings is that text, as a JSON string (streamed
//     as it is written, since nothing can change it);
//   - any other is held until its value ends, then is its JSON when that parses to a type
//     the schema allows (Python's True, False and None, which templates that print values
//     with Python's str() teach, read as true, false and null), and otherwise the text as a
//     string;
//   - a parameter the request does not describe is its JSON when the text parses as JSON,
//     else the text as a string.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "server/parser_text.h"

namespace herd::server {

// The JSON types a parameter's schema allows, a bit each; kJsonAny: not said (any).
constexpr uint8_t kJsonAny = 0;
constexpr uint8_t kJsonString = 1;
constexpr uint8_t kJsonNumber = 2;  // "number" and "integer"
constexpr uint8_t kJsonBoolean = 4;
constexpr uint8_t kJsonObject = 8;
constexpr uint8_t kJsonArray = 16;
constexpr uint8_t kJsonNull = 32;

// Per function, per parameter, the types its schema allows.
struct ParameterTypes {
  std::map<std::string, std::map<std::string, uint8_t, std::less<>>, std::less<>> functions;
  uint8_t of(std::string_view function, std::string_view parameter) const;
};

// The parameter types of a request's tools ([{"type": "function", "function": {"name": ...,
// "parameters": {"properties": ...}}}]): from each property's "type" (a name or a list),
// or the types of its "enum" or "const" values, or the union of its "anyOf" / "oneOf"
// members; kJsonAny where none of these says.
std::shared_ptr<const ParameterTypes> parameter_types(const nlohmann::ordered_json& tools);

// The JSON text of a parameter's whole raw value, typed as above.
std::string typed_value(std::string_view raw, uint8_t types);

// Writes one call's arguments object into ReadCall::arguments as parameters arrive.
// trim_newline: the format writes a newline after the value's opening and before its
// closing (Qwen3-Coder's <parameter=K>\nV\n</parameter>), which are not the value's.
class TypedArguments {
 public:
  explicit TypedArguments(bool trim_newline) : trim_newline_(trim_newline) {}
  void open(ReadCall& call);  // "{"
  void begin(ReadCall& call, std::string_view key, uint8_t types);
  void add(ReadCall& call, std::string_view text);  // more of the value's raw text
  void end(ReadCall& call);                         // the value is whole
  void close(ReadCall& call);  // ends a value still open, then "}": the call is done
  bool in_value() const { return in_value_; }

 private:
  bool trim_newline_;
  bool in_value_ = false;
  bool first_ = true;          // no parameter written yet
  bool streamed_ = false;      // the value is a string written as it comes
  bool at_start_ = true;       // nothing of the value read yet
  bool held_newline_ = false;  // a streamed value's last newline, held: it may be the closing's
  uint8_t types_ = kJsonAny;
  std::string raw_;  // a held value's text
};

}  // namespace herd::server
