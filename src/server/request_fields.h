// The checks every API's request parser makes of a JSON body and its fields (OpenAI's,
// Ollama's, Anthropic's, the Responses API's): each failure is a 400 ApiError naming the
// field, which the endpoint writes in its API's error shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace herd::server::fields {

using json = nlohmann::ordered_json;

// Throws ApiError(400, message) naming `param`.
[[noreturn]] void bad(const std::string& param, const std::string& message);

// The body as a JSON object; deeper bodies are refused (http::kMaxJsonDepth) before a value
// is built: the template engine and the serializer recurse over values.
json parse_object(std::string_view body);

// Whether `o` has `name` and it is not null (null reads as absent, as the APIs document).
bool given(const json& o, const char* name);

// o[name] when given, checked to be a finite number in [lo, hi]; `where` prefixes the name in
// the error ("options.").
std::optional<double> number(const json& o, const char* name, double lo, double hi,
                             const std::string& where = "");

// How integers may be written: strictly, or also as a float with no fraction (40.0), as
// Ollama's clients (Go's, JavaScript's) may write them.
enum class Integers { kStrict, kWholeFloats };

// o[name] when given, checked to be an integer in [lo, hi].
std::optional<int64_t> integer(const json& o, const char* name, int64_t lo, int64_t hi,
                               const std::string& where = "", Integers form = Integers::kStrict);

// o[name] when given, checked to be a boolean.
std::optional<bool> boolean(const json& o, const char* name, const std::string& where = "");

}  // namespace herd::server::fields
