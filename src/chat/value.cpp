#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/unicode.h"

namespace herd::chat {

void fail(const std::string& message) {
  throw RenderError(message);
}
void fail_at(int line, const std::string& message) {
  throw RenderError(message, line);
}

uint32_t nesting_of(const Value& v) {
  if (v.is_list()) return v.as_list().depth;
  if (v.is_dict()) return v.as_dict().depth;
  if (v.is_object()) return v.as_object()->nesting();
  return 0;
}

uint32_t checked_depth(uint32_t child_depth) {
  if (child_depth >= kMaxNesting)
    fail("value nested more than " + std::to_string(kMaxNesting) + " levels deep");
  return child_depth + 1;
}

// Wrapping a container in a Value records its nesting depth (and refuses excessive depth).
Value::Value(std::shared_ptr<const List> list) : kind_(Kind::List) {
  uint32_t child = 0;
  for (const auto& item : list->items) child = std::max(child, nesting_of(item));
  const_cast<List&>(*list).depth = checked_depth(child);
  ptr_ = std::const_pointer_cast<List>(std::move(list));
}

Value::Value(std::shared_ptr<const Dict> dict) : kind_(Kind::Dict) {
  uint32_t child = 0;
  for (const auto& [k, v] : dict->entries())
    child = std::max({child, nesting_of(k), nesting_of(v)});
  const_cast<Dict&>(*dict).depth = checked_depth(child);
  ptr_ = std::const_pointer_cast<Dict>(std::move(dict));
}
Value::Value(std::shared_ptr<Object> object) : kind_(Kind::Object), ptr_(std::move(object)) {}

Value Value::list(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Value::tuple(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = true;
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Object::call(Renderer&, CallArgs&) {
  fail("'" + type_name() + "' object is not callable");
}

// ---------------------------------------------------------------------------------------
// Dict

namespace {

constexpr size_t kIndexThreshold = 8;

// A string naming the key's equality class: equal keys give equal strings.
bool key_string(const Value& k, std::string& out) {
  switch (k.kind()) {
    case Kind::String:
      out = "s" + k.as_string();
      return true;
    case Kind::Bool:
    case Kind::Int:
      out = "i" + std::to_string(k.as_int());
      return true;
    case Kind::Float: {
      const double d = k.as_float();
      if (std::floor(d) == d && std::fabs(d) < 9e18) {
        out = "i" + std::to_string(static_cast<int64_t>(d));
      } else {
        out = "f" + float_repr(d);
      }
      return true;
    }
    case Kind::None:
      out = "n";
      return true;
    case Kind::Undefined:
      out = "u";
      return true;
    case Kind::List: {
      if (!k.is_tuple()) return false;
      out = "t(";
      std::string part;
      for (const auto& item : k.as_list().items) {
        if (!key_string(item, part)) return false;
        out += std::to_string(part.size()) + ":" + part;
      }
      out += ")";
      return true;
    }
    case Kind::Object:
      out = "o" + std::to_string(reinterpret_cast<uintptr_t>(k.identity()));
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_hashable(const Value& v) {
  if (v.is_list()) {
    if (!v.is_tuple()) return false;
    for (const auto& item : v.as_list().items) {
      if (!is_hashable(item)) return false;
    }
    return true;
  }
  return !v.is_dict();
}

const Value* Dict::find(std::string_view key) const {
  if (!index_.empty()) {
    std::string k = "s";
    k += key;
    auto it = index_.find(k);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  if (!is_hashable(key)) return nullptr;
  if (!index_.empty()) {
    std::string k;
    if (!key_string(key, k)) return nullptr;
    auto it = index_.find(k);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (!is_hashable(key)) fail("unhashable type: '" + type_name(key) + "'");
  if (Value* existing = const_cast<Value*>(find(key))) {
    *existing = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() > kIndexThreshold) {
    std::string k;
    if (index_.empty()) {
      for (size_t i = 0; i < entries_.size(); ++i) {
        if (key_string(entries_[i].first, k)) index_.emplace(k, i);
      }
    } else if (key_string(entries_.back().first, k)) {
      index_.emplace(k, entries_.size() - 1);
    }
  }
}

// ---------------------------------------------------------------------------------------
// str / repr

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') {
    out = "-";
    pos = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exp = std::stoi(sci.substr(e + 1));
  const int decpt = exp + 1;
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(decpt - n, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ebuf;
  }
  return out;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = utf8_next(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_py_printable(c)) {
      utf8_append(out, c);
    } else {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

namespace {

void repr_into(const Value& v, std::string& out, int depth);

void seq_repr(const List& l, std::string& out, int depth) {
  if (!l.view.empty()) {
    out += l.view;
    out += "(";
  }
  out += l.is_tuple ? "(" : "[";
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    repr_into(l.items[i], out, depth + 1);
  }
  if (l.is_tuple && l.items.size() == 1) out += ",";
  out += l.is_tuple ? ")" : "]";
  if (!l.view.empty()) out += ")";
}

void repr_into(const Value& v, std::string& out, int depth) {
  if (depth > 2 * static_cast<int>(kMaxNesting)) fail("value nested too deeply to print");
  switch (v.kind()) {
    case Kind::String:
      if (v.is_markup()) {
        out += "Markup(" + string_repr(v.as_string()) + ")";
      } else {
        out += string_repr(v.as_string());
      }
      return;
    case Kind::List:
      seq_repr(v.as_list(), out, depth);
      return;
    case Kind::Dict: {
      out += "{";
      bool first = true;
      for (const auto& [k, val] : v.as_dict().entries()) {
        if (!first) out += ", ";
        first = false;
        repr_into(k, out, depth + 1);
        out += ": ";
        repr_into(val, out, depth + 1);
      }
      out += "}";
      return;
    }
    case Kind::Undefined:
      out += "Undefined";
      return;
    case Kind::Object:
      out += v.as_object()->repr(depth + 1);
      return;
    default:
      out += to_str(v);
  }
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.as_int());
    case Kind::Float:
      return float_repr(v.as_float());
    case Kind::String:
      return v.as_string();
    case Kind::Object:
      return v.as_object()->repr(0);
    default:
      return repr(v);
  }
}

std::string repr(const Value& v, int depth) {
  std::string out;
  repr_into(v, out, depth);
  return out;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return v.is_markup() ? "Markup" : "str";
    case Kind::List:
      return v.is_tuple() ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Object:
      return v.as_object()->type_name();
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.as_bool();
    case Kind::Int:
      return v.as_int() != 0;
    case Kind::Float:
      return v.as_float() != 0.0;
    case Kind::String:
      return !v.as_string().empty();
    case Kind::List:
      return !v.as_list().items.empty();
    case Kind::Dict:
      return v.as_dict().size() != 0;
    case Kind::Object:
      return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Comparison

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.as_string() == b.as_string();
    case Kind::List: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      if (&x == &y) return true;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!py_equal(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      const auto& x = a.as_dict();
      const auto& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    case Kind::Object:
      return a.identity() == b.identity();
    default:
      return false;
  }
}

int py_compare(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order = code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail(std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return code_point_count(v.as_string());
    case Kind::List:
      return v.as_list().items.size();
    case Kind::Dict:
      return v.as_dict().size();
    default:
      fail("object of type '" + type_name(v) + "' has no len()");
  }
}

bool py_iterable(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::String:
    case Kind::List:
    case Kind::Dict:
      return true;
    case Kind::Object:
      return v.as_object()->iterable();
    default:
      return false;
  }
}

std::shared_ptr<const List> py_iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::List:
      if (!v.as_list().view.empty()) {
        auto l = std::make_shared<List>();
        l->items = v.as_list().items;
        return l;
      }
      return v.list_ptr();
    case Kind::Undefined:
      return std::make_shared<const List>();
    case Kind::String: {
      auto l = std::make_shared<List>();
      const std::string& s = v.as_string();
      size_t i = 0;
      while (i < s.size()) {
        const size_t start = i;
        utf8_next(s, i);
        l->items.emplace_back(s.substr(start, i - start));
      }
      return l;
    }
    case Kind::Dict: {
      auto l = std::make_shared<List>();
      for (const auto& [k, val] : v.as_dict().entries()) l->items.push_back(k);
      return l;
    }
    case Kind::Object:
      if (v.as_object()->iterable()) {
        auto l = std::make_shared<List>();
        l->items = v.as_object()->iterate();
        return l;
      }
      break;
    default:
      break;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

// ---------------------------------------------------------------------------------------

namespace {

Value from_json_at(const nlohmann::ordered_json& j, uint32_t depth) {
  using nlohmann::ordered_json;
  if (depth > kMaxNesting)
    fail("JSON input nested more than " + std::to_string(kMaxNesting) + " levels deep");
  switch (j.type()) {
    case ordered_json::value_t::null:
      return Value::none();
    case ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case ordered_json::value_t::array: {
      auto l = std::make_shared<List>();
      l->items.reserve(j.size());
      for (const auto& item : j) l->items.push_back(from_json_at(item, depth + 1));
      return Value(std::shared_ptr<const List>(std::move(l)));
    }
    case ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it)
        d->set(Value(it.key()), from_json_at(it.value(), depth + 1));
      return Value(std::shared_ptr<const Dict>(std::move(d)));
    }
    default:
      return Value::none();  // binary / discarded: not produced by JSON text
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace herd::chat
