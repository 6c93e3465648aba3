// Python's str operations on UTF-8 text by code point (strip, split, splitlines, replace,
// title, capitalize, slicing, padding, printf-style %), shared by string methods, filters
// and operators.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.h"

namespace herd::chat {

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<Value> py_split(std::string_view s, const Value& sep, int64_t maxsplit,
                            bool from_right);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// Throws RenderError when the result would exceed max_bytes.
std::string py_replace(std::string_view s, std::string_view old, std::string_view replacement,
                       int64_t count, size_t max_bytes);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()
// s[start:stop:step] by code points, Python semantics for negative and missing bounds.
std::string py_slice_string(std::string_view s, std::optional<int64_t> start,
                            std::optional<int64_t> stop, std::optional<int64_t> step);
std::vector<Value> py_slice_items(const std::vector<Value>& items, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step);
// Python's printf-style formatting: format % args.
// Throws RenderError when the result would exceed max_bytes.
std::string py_percent_format(std::string_view format, const Value& args, size_t max_bytes);

// Pads s to `width` code points with the one-character `fill` (Undefined: a space):
// where < 0 pads on the right (ljust), > 0 on the left (rjust), 0 on both sides (center).
std::string py_pad(std::string_view s, int64_t width, const Value& fill, int where);

}  // namespace herd::chat
