// Helpers of the output parsers' tests: a reply parsed whole, a character at a time and in
// random pieces, which must agree (a stream and a whole reply are the same reply).
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/output_parser.h"

namespace herd::server::parser_testing {

inline void append(ParsedDelta& all, const ParsedDelta& d) {
  all.append(d);
}

inline ParsedDelta parse(const OutputParserOptions& o, const std::string& text, bool by_char,
                         bool check_leaks = true) {
  OutputParser p(o);
  ParsedDelta all;
  if (by_char) {
    for (char c : text) {
      ParsedDelta d = p.push(std::string(1, c));
      // Nothing that could start a marker is handed out as content before it completes.
      if (check_leaks) {
        EXPECT_EQ(d.content.find('<'), std::string::npos) << text;
        EXPECT_EQ(d.content.find('['), std::string::npos) << text;
      }
      append(all, d);
    }
  } else {
    append(all, p.push(text));
  }
  append(all, p.finish());
  return all;
}

// The text pushed in pieces of 1 to 7 bytes (a seeded draw), as tokens arrive: a marker
// or a UTF-8 character may be cut anywhere.
inline ParsedDelta parse_chunks(const OutputParserOptions& o, const std::string& text,
                                uint32_t seed) {
  OutputParser p(o);
  ParsedDelta all;
  std::mt19937 rng(seed);
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min<size_t>(text.size() - at, 1 + rng() % 7);
    all.append(p.push(text.substr(at, n)));
    at += n;
  }
  all.append(p.finish());
  return all;
}

inline void expect_same(const ParsedDelta& a, const ParsedDelta& b) {
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.reasoning, b.reasoning);
  EXPECT_EQ(a.tool_calls.size(), b.tool_calls.size());
  for (size_t i = 0; i < std::min(a.tool_calls.size(), b.tool_calls.size()); ++i) {
    EXPECT_EQ(a.tool_calls[i].index, b.tool_calls[i].index);
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id);
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name);
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments);
  }
}

// Parses whole, a character at a time and in random pieces, and checks they agree.
inline ParsedDelta both(const OutputParserOptions& o, const std::string& text,
                        bool check_leaks = true) {
  const ParsedDelta whole = parse(o, text, false);
  expect_same(whole, parse(o, text, true, check_leaks));
  for (uint32_t seed : {1u, 2u, 3u}) expect_same(whole, parse_chunks(o, text, seed));
  return whole;
}

}  // namespace herd::server::parser_testing
