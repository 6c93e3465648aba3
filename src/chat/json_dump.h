// Python's json.dumps() over template values, byte for byte: transformers' `tojson` filter
// is json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...), whose
// output differs from nlohmann::json's (", " and ": " separators, float repr, escapes).
#pragma once

#include <optional>
#include <string>

#include "chat/value.h"

namespace herd::chat {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // None: one line; "": newlines without indentation
  std::optional<std::string> item_separator;  // default ", " (or "," when indenting)
  std::string key_separator = ": ";
  bool sort_keys = false;
  size_t max_bytes = size_t{64} << 20;  // a longer result is a RenderError
};

// Throws RenderError ("Object of type Undefined is not JSON serializable") for values JSON
// cannot express.
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace herd::chat
