// UTF-8 helpers with Python str semantics: strings are sequences of code points, so length,
// indexing, slicing, case mapping and whitespace follow Python, not bytes. Invalid bytes
// decode to lone surrogates U+DC80..U+DCFF (Python's "surrogateescape") and encode back to
// the same byte, so any byte string survives a decode/encode round trip unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace herd::chat {

std::vector<char32_t> utf8_decode(std::string_view text);
void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(const std::vector<char32_t>& cps);
std::string utf8_encode(const char32_t* cps, size_t n);

// Decodes the code point starting at text[i] and advances i past it.
char32_t utf8_next(std::string_view text, size_t& i);

bool is_ascii(std::string_view text);
// Number of code points (Python len()).
size_t code_point_count(std::string_view text);

// Python str.isspace() for one code point.
bool is_py_space(char32_t cp);
// Line boundaries of Python str.splitlines().
bool is_line_break(char32_t cp);
// Python str.isalnum()/isalpha()/isdigit() approximations: ASCII exact, other scripts by
// block (letters of Latin, Greek, Cyrillic, CJK etc. count as alphabetic).
bool is_py_alpha(char32_t cp);
bool is_py_digit(char32_t cp);
bool is_py_printable(char32_t cp);

// Simple (one-to-one) case mapping covering ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic; other code points map to themselves.
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
bool is_cased_upper(char32_t cp);
bool is_cased_lower(char32_t cp);

std::string str_upper(std::string_view text);
std::string str_lower(std::string_view text);

}  // namespace herd::chat
