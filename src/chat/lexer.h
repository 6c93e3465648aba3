// Lexer: template source -> tokens, with Jinja2's whitespace rules as transformers configures
// them (trim_blocks, lstrip_blocks, "-"/"+" modifiers, newline normalisation, dropping one
// trailing newline). Text between tags becomes Text tokens; comments and raw blocks are
// resolved here, so the parser sees only text, {{ }} and {% %} token runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace herd::chat {

enum class TokenType {
  Text,
  VariableBegin,
  VariableEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Operator,
  End
};

struct Token {
  TokenType type;
  std::string text;  // Text/Name/String (unescaped)/Operator text
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws RenderError (with the line) on malformed input: unterminated tags, strings or
// comments, unbalanced brackets, characters Jinja2 does not accept inside tags.
std::vector<Token> tokenize(std::string_view source);

}  // namespace herd::chat
