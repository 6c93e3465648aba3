#include "chat/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/unicode.h"

namespace herd::chat {
namespace {

constexpr int kMaxDepth = 500;

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : opt_(options) {
    item_sep_ = options.item_separator.value_or(options.indent ? "," : ", ");
  }

  [[noreturn]] void too_long() const {
    fail("tojson result exceeds " + std::to_string(opt_.max_bytes) + " bytes");
  }

  void dump(const Value& v, int level, std::string& out) {
    if (level > kMaxDepth) fail("value nested too deeply for tojson");
    if (out.size() > opt_.max_bytes) too_long();
    switch (v.kind()) {
      case Kind::None:
        out += "null";
        return;
      case Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        out += std::to_string(v.as_int());
        return;
      case Kind::Float:
        out += float_text(v.as_float());
        return;
      case Kind::String:
        string(v.as_string(), out);
        return;
      case Kind::List:
        list(v.as_list(), level, out);
        return;
      case Kind::Dict:
        dict(v.as_dict(), level, out);
        return;
      default:
        fail("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

 private:
  static std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return float_repr(d);
  }

  void newline(int level, std::string& out) {
    if (out.size() > opt_.max_bytes) too_long();
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *opt_.indent;
  }

  void list(const List& l, int level, std::string& out) {
    if (l.items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    if (opt_.indent) newline(level + 1, out);
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) {
        out += item_sep_;
        if (opt_.indent) newline(level + 1, out);
      }
      dump(l.items[i], level + 1, out);
    }
    if (opt_.indent) newline(level, out);
    out.push_back(']');
  }

  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String:
        return k.as_string();
      case Kind::Float:
        return float_text(k.as_float());
      case Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Kind::None:
        return "null";
      case Kind::Int:
        return std::to_string(k.as_int());
      default:
        fail("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void dict(const Dict& d, int level, std::string& out) {
    if (d.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(d.size());
    for (const auto& e : d.entries()) entries.push_back(&e);
    if (opt_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return py_compare(a->first, b->first) < 0;
      });
    }
    out.push_back('{');
    if (opt_.indent) newline(level + 1, out);
    bool first = true;
    for (const auto* e : entries) {
      if (!first) {
        out += item_sep_;
        if (opt_.indent) newline(level + 1, out);
      }
      first = false;
      string(key_text(e->first), out);
      out += opt_.key_separator;
      dump(e->second, level + 1, out);
    }
    if (opt_.indent) newline(level, out);
    out.push_back('}');
  }

  void string(const std::string& s, std::string& out) {
    out.push_back('"');
    size_t i = 0;
    while (i < s.size()) {
      const unsigned char b = static_cast<unsigned char>(s[i]);
      if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
        out.push_back(static_cast<char>(b));
        ++i;
        continue;
      }
      const size_t start = i;
      const char32_t c = utf8_next(s, i);
      switch (c) {
        case '"':
          out += "\\\"";
          continue;
        case '\\':
          out += "\\\\";
          continue;
        case '\n':
          out += "\\n";
          continue;
        case '\r':
          out += "\\r";
          continue;
        case '\t':
          out += "\\t";
          continue;
        case '\b':
          out += "\\b";
          continue;
        case '\f':
          out += "\\f";
          continue;
        default:
          break;
      }
      if (c < 0x20 || (opt_.ensure_ascii && c >= 0x7F)) {
        char buf[16];
        if (c >= 0x10000 && !(c >= 0xDC80 && c <= 0xDCFF)) {
          const char32_t v = c - 0x10000;
          std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + static_cast<unsigned>(v >> 10),
                        0xDC00 + static_cast<unsigned>(v & 0x3FF));
        } else {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        }
        out += buf;
      } else {
        out.append(s, start, i - start);
      }
    }
    out.push_back('"');
  }

  const JsonDumpOptions& opt_;
  std::string item_sep_;
};

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).dump(value, 0, out);
  if (out.size() > options.max_bytes)
    fail("tojson result exceeds " + std::to_string(options.max_bytes) + " bytes");
  return out;
}

}  // namespace herd::chat
