// JSON from the network, parsed with a depth limit that holds before anything is built.
//
// nlohmann's parser is iterative, but what follows a parse is not: dump(), copies, the
// template engine and the schema compiler recurse over a value, and a 400 KB body of '['
// is 400000 levels, enough to overflow any thread's stack. A parser callback cannot help:
// it sees the depth only while the deep value is being built. So a SAX pass that builds
// nothing (its memory is the lexer's one token) checks the depth first, and only JSON within
// the limit is parsed into a value.
//
//   std::string problem;
//   const json body = parse_bounded_json(req.body, &problem);
//   if (body.is_discarded()) ... problem: "the JSON nests deeper than 64 levels" ...
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace herd::http {

// Deeper values are refused. Every request herd takes nests a few levels (a chat message's
// content parts, a JSON schema's properties: under 20 in practice); 64 leaves room for
// schemas and tool arguments while keeping every recursion over a value shallow.
inline constexpr int kMaxJsonDepth = 64;

// What is wrong with `text` as JSON of at most `max_depth` levels (an array or object is a
// level): "" when nothing is, else a sentence naming the problem ("the JSON nests deeper
// than 64 levels", "the JSON is not valid at byte 17: ...").
std::string json_problem(std::string_view text, int max_depth = kMaxJsonDepth);

// `text` parsed, or a discarded value (is_discarded()) when json_problem() finds a problem;
// then *problem (when given) says which. Json: nlohmann::json or nlohmann::ordered_json.
template <class Json = nlohmann::json>
Json parse_bounded_json(std::string_view text, std::string* problem = nullptr,
                        int max_depth = kMaxJsonDepth) {
  std::string why = json_problem(text, max_depth);
  if (!why.empty()) {
    if (problem) *problem = std::move(why);
    return Json(Json::value_t::discarded);
  }
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace herd::http
