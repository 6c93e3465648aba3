#include "chat/methods.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/objects.h"
#include "chat/py_string.h"
#include "chat/renderer.h"
#include "chat/unicode.h"

namespace herd::chat {
namespace {

const std::string_view kStrMethods[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
const std::string_view kDictSafe[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
const std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
// Jinja2 3.1's ImmutableSandboxedEnvironment lets list.pop() and list.clear() through (its
// table of mutating methods lists only append, extend, insert, remove, reverse and sort),
// so templates may use them and they mutate the list in place, visible through aliases.
const std::string_view kListSafe[] = {"clear", "copy", "count", "index", "pop"};
const std::string_view kListUnsafe[] = {"append", "extend", "insert", "remove", "reverse", "sort"};

template <size_t N>
bool contains(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

const std::string& want_str(const Value& v, std::string_view method, int pos = 1) {
  if (!v.is_string())
    fail(std::string(method) + "() argument " + std::to_string(pos) + " must be str, not " +
         type_name(v));
  return v.as_string();
}

int64_t want_int(const Value& v, std::string_view method) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  fail("'" + type_name(v) + "' object cannot be interpreted as an integer (in " +
       std::string(method) + ")");
}

std::optional<int64_t> opt_index(const std::optional<Value>& v, std::string_view method) {
  if (!v || v->is_none()) return std::nullopt;
  return want_int(*v, method);
}

// Normalises Python's (start, end) arguments to byte offsets into s.
std::pair<size_t, size_t> byte_range(std::string_view s, const std::optional<Value>& start,
                                     const std::optional<Value>& end, std::string_view method) {
  const auto a = opt_index(start, method);
  const auto b = opt_index(end, method);
  if (!a && !b) return {0, s.size()};
  const std::vector<char32_t> cps = utf8_decode(s);
  const int64_t n = static_cast<int64_t>(cps.size());
  int64_t lo = a.value_or(0), hi = b.value_or(n);
  if (lo < 0) lo = std::max<int64_t>(0, lo + n);
  if (hi < 0) hi = std::max<int64_t>(0, hi + n);
  lo = std::min(lo, n);
  hi = std::min(hi, n);
  if (hi < lo) return {1, 0};  // empty and matches nothing, not even ""
  auto offset = [&](int64_t cp_index) {
    size_t bytes = 0;
    for (int64_t i = 0; i < cp_index; ++i) {
      std::string tmp;
      utf8_append(tmp, cps[i]);
      bytes += tmp.size();
    }
    return bytes;
  };
  return {offset(lo), offset(hi)};
}

Value cp_index_of(std::string_view s, size_t byte_offset) {
  return Value(code_point_count(s.substr(0, byte_offset)));
}

bool affix_match(std::string_view s, const Value& affix, bool prefix, std::string_view method) {
  auto test = [&](const Value& a) {
    const std::string& x = want_str(a, method);
    if (x.size() > s.size()) return false;
    return prefix ? s.substr(0, x.size()) == x : s.substr(s.size() - x.size()) == x;
  };
  if (affix.is_tuple()) {
    for (const auto& item : affix.as_list().items)
      if (test(item)) return true;
    return false;
  }
  if (!affix.is_string())
    fail(std::string(method) + " first arg must be str or a tuple of str, not " + type_name(affix));
  return test(affix);
}

std::string str_format(Renderer& r, std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) fail("Single '{' encountered in format string");
    std::string field(fmt.substr(i + 1, close - i - 1));
    i = close;
    std::string spec;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    Value v;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) fail("Replacement index out of range");
      v = args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      if (field.size() > 9) fail("Replacement index out of range");
      const size_t k = std::stoul(field);
      if (k >= args.positional.size()) fail("Replacement index out of range");
      v = args.positional[k];
    } else {
      bool found = false;
      for (const auto& [key, val] : args.keyword) {
        if (key == field) {
          v = val;
          found = true;
        }
      }
      if (!found) fail("KeyError: '" + field + "'");
    }
    std::string text = conversion == 'r' ? repr(v) : to_str(v);
    if (!spec.empty()) {
      // Only alignment with a width is supported: [[fill]align]width.
      char align = '<';
      std::string fill = " ";
      size_t k = 0;
      if (spec.size() >= 2 && (spec[1] == '<' || spec[1] == '>' || spec[1] == '^')) {
        fill = spec.substr(0, 1);
        align = spec[1];
        k = 2;
      } else if (spec[0] == '<' || spec[0] == '>' || spec[0] == '^') {
        align = spec[0];
        k = 1;
      } else if (v.is_number()) {
        align = '>';
      }
      const std::string width = spec.substr(k);
      if (width.empty() || width.size() > 9 ||
          !std::all_of(width.begin(), width.end(), [](char d) { return d >= '0' && d <= '9'; }))
        fail("unsupported format specification '" + spec + "'");
      text =
          py_pad(text, std::stoll(width), Value(fill), align == '<' ? -1 : (align == '>' ? 1 : 0));
    }
    r.check_size(out.size() + text.size());
    out += text;
  }
  return out;
}

Value str_method(Renderer& r, const std::string& s, std::string_view name, CallArgs& args) {
  auto a = [&](std::initializer_list<std::string_view> names) {
    return bind_args(args, name, names);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto p = a({"chars"});
    return Value(py_strip(s, p[0].value_or(Value::none()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto p = a({"sep", "maxsplit"});
    const int64_t maxsplit = p[1] ? want_int(*p[1], name) : -1;
    return Value::list(py_split(s, p[0].value_or(Value::none()), maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    auto p = a({"keepends"});
    std::vector<Value> out;
    for (auto& line : py_splitlines(s, p[0] && truthy(*p[0]))) out.emplace_back(std::move(line));
    return Value::list(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    auto p = a({"prefix", "start", "end"});
    if (!p[0]) fail(std::string(name) + "() takes at least 1 argument (0 given)");
    auto [lo, hi] = byte_range(s, p[1], p[2], name);
    if (hi < lo) return Value(false);
    return Value(
        affix_match(std::string_view(s).substr(lo, hi - lo), *p[0], name == "startswith", name));
  }
  if (name == "replace") {
    auto p = a({"old", "new", "count"});
    if (!p[0] || !p[1]) fail("replace() takes at least 2 arguments");
    const int64_t count = p[2] ? want_int(*p[2], name) : -1;
    std::string out = py_replace(s, want_str(*p[0], name), want_str(*p[1], name, 2), count,
                                 r.options().max_output_bytes);
    r.check_size(out.size());
    return Value(std::move(out));
  }
  if (name == "upper") return Value(str_upper(s));
  if (name == "lower" || name == "casefold") return Value(str_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "swapcase") {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      const char32_t c = utf8_next(s, i);
      utf8_append(out, is_cased_upper(c) ? to_lower(c) : to_upper(c));
    }
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto p = a({"sub", "start", "end"});
    if (!p[0]) fail(std::string(name) + "() takes at least 1 argument (0 given)");
    const std::string& sub = want_str(*p[0], name);
    auto [lo, hi] = byte_range(s, p[1], p[2], name);
    if (hi < lo) {
      if (name == "count") return Value(0);
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value(-1);
    }
    const std::string_view window = std::string_view(s).substr(lo, hi - lo);
    if (name == "count") {
      if (sub.empty()) return Value(code_point_count(window) + 1);
      int64_t n = 0;
      for (size_t at = window.find(sub); at != std::string_view::npos;
           at = window.find(sub, at + sub.size()))
        ++n;
      return Value(n);
    }
    const size_t at = (name == "find" || name == "index") ? window.find(sub) : window.rfind(sub);
    if (at == std::string_view::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value(-1);
    }
    return cp_index_of(s, lo + at);
  }
  if (name == "join") {
    auto p = a({"iterable"});
    if (!p[0]) fail("join() takes exactly one argument (0 given)");
    auto items = py_iterate(*p[0]);
    std::string out;
    for (size_t i = 0; i < items->items.size(); ++i) {
      const Value& item = items->items[i];
      if (!item.is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(item) +
             " found");
      if (i) out += s;
      out += item.as_string();
      r.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(str_format(r, s, args));
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto p = a({"width", "fillchar"});
    if (!p[0]) fail(std::string(name) + "() takes at least 1 argument (0 given)");
    const int where = name == "center" ? 0 : (name == "ljust" ? -1 : 1);
    return Value(py_pad(s, want_int(*p[0], name), p[1].value_or(Value()), where));
  }
  if (name == "zfill") {
    auto p = a({"width"});
    if (!p[0]) fail("zfill() takes exactly one argument (0 given)");
    const int64_t width = want_int(*p[0], name);
    const int64_t len = static_cast<int64_t>(code_point_count(s));
    if (width <= len) return Value(s);
    if (width > (int64_t{1} << 24)) fail("zfill width too large");
    std::string out = s;
    size_t at = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    out.insert(at, static_cast<size_t>(width - len), '0');
    return Value(std::move(out));
  }
  if (name == "partition" || name == "rpartition") {
    auto p = a({"sep"});
    if (!p[0]) fail(std::string(name) + "() takes exactly one argument (0 given)");
    const std::string& sep = want_str(*p[0], name);
    if (sep.empty()) fail("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      if (name == "partition") return Value::tuple({Value(s), Value(""), Value("")});
      return Value::tuple({Value(""), Value(""), Value(s)});
    }
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto p = a({"affix"});
    if (!p[0]) fail(std::string(name) + "() takes exactly one argument (0 given)");
    const std::string& x = want_str(*p[0], name);
    if (name == "removeprefix") {
      return Value(s.compare(0, x.size(), x) == 0 && x.size() <= s.size() ? s.substr(x.size()) : s);
    }
    if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  if (name.substr(0, 2) == "is") {
    const std::vector<char32_t> cps = utf8_decode(s);
    auto all = [&](auto pred) { return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred); };
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
      return Value(all([](char32_t c) { return is_py_digit(c); }));
    if (name == "isalpha") return Value(all([](char32_t c) { return is_py_alpha(c); }));
    if (name == "isalnum")
      return Value(all([](char32_t c) { return is_py_alpha(c) || is_py_digit(c); }));
    if (name == "isspace") return Value(all([](char32_t c) { return is_py_space(c); }));
    if (name == "isascii")
      return Value(std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < 0x80; }));
    if (name == "isprintable")
      return Value(
          std::all_of(cps.begin(), cps.end(), [](char32_t c) { return is_py_printable(c); }));
    if (name == "islower" || name == "isupper") {
      bool cased = false;
      for (char32_t c : cps) {
        if (is_cased_upper(c)) {
          if (name == "islower") return Value(false);
          cased = true;
        } else if (is_cased_lower(c)) {
          if (name == "isupper") return Value(false);
          cased = true;
        }
      }
      return Value(cased);
    }
    if (name == "istitle") return Value(!cps.empty() && py_title(s) == s && str_lower(s) != s);
    if (name == "isidentifier") {
      return Value(!cps.empty() && !is_py_digit(cps[0]) &&
                   std::all_of(cps.begin(), cps.end(), [](char32_t c) {
                     return is_py_alpha(c) || is_py_digit(c) || c == '_';
                   }));
    }
  }
  fail("str." + std::string(name) + "() is not supported");
}

Value dict_method(const Value& self, std::string_view name, CallArgs& args) {
  const Dict& d = self.as_dict();
  if (name == "get") {
    auto p = bind_args(args, name, {"key", "default"});
    if (!p[0]) fail("get expected at least 1 argument, got 0");
    if (const Value* v = d.find(*p[0])) return *v;
    return p[1].value_or(Value::none());
  }
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(args, name, {});
    std::vector<Value> out;
    out.reserve(d.size());
    for (const auto& [k, v] : d.entries()) {
      if (name == "items") {
        out.push_back(Value::tuple({k, v}));
      } else {
        out.push_back(name == "keys" ? k : v);
      }
    }
    auto view = std::make_shared<List>();
    view->items = std::move(out);
    view->view = name == "items" ? "dict_items" : (name == "keys" ? "dict_keys" : "dict_values");
    return Value(std::shared_ptr<const List>(std::move(view)));
  }
  if (name == "copy") {
    bind_args(args, name, {});
    return self;
  }
  if (name == "fromkeys") {
    auto p = bind_args(args, name, {"iterable", "value"});
    if (!p[0]) fail("fromkeys expected at least 1 argument, got 0");
    auto out = std::make_shared<Dict>();
    const auto keys = py_iterate(*p[0]);
    for (const auto& k : keys->items) out->set(k, p[1].value_or(Value::none()));
    return Value(std::shared_ptr<const Dict>(std::move(out)));
  }
  fail("dict." + std::string(name) + "() is not supported");
}

Value list_method(const Value& self, std::string_view name, CallArgs& args) {
  const auto& items = self.as_list().items;
  if (name == "copy" && !self.is_tuple()) {
    bind_args(args, name, {});
    return Value::list(items);
  }
  if (name == "pop" || name == "clear") {
    // The only mutation the sandbox allows; lists are built non-const, so casting is sound.
    auto& mutable_items = const_cast<List&>(self.as_list()).items;
    if (name == "clear") {
      bind_args(args, name, {});
      mutable_items.clear();
      return Value::none();
    }
    auto p = bind_args(args, name, {"index"});
    if (mutable_items.empty()) fail("pop from empty list");
    int64_t i = p[0] ? want_int(*p[0], name) : -1;
    if (i < 0) i += static_cast<int64_t>(mutable_items.size());
    if (i < 0 || i >= static_cast<int64_t>(mutable_items.size())) fail("pop index out of range");
    Value out = std::move(mutable_items[i]);
    mutable_items.erase(mutable_items.begin() + i);
    return out;
  }
  if (name == "count") {
    auto p = bind_args(args, name, {"value"});
    if (!p[0]) fail("count() takes exactly one argument (0 given)");
    int64_t n = 0;
    for (const auto& item : items) n += py_equal(item, *p[0]);
    return Value(n);
  }
  if (name == "index") {
    auto p = bind_args(args, name, {"value", "start", "stop"});
    if (!p[0]) fail("index expected at least 1 argument, got 0");
    for (size_t i = 0; i < items.size(); ++i)
      if (py_equal(items[i], *p[0])) return Value(i);
    fail(repr(*p[0]) + " is not in list");
  }
  fail(type_name(self) + "." + std::string(name) + "() is not supported");
}

}  // namespace

MethodKind find_method(const Value& v, std::string_view name) {
  switch (v.kind()) {
    case Kind::String:
      return contains(kStrMethods, name) ? MethodKind::Safe : MethodKind::Missing;
    case Kind::Dict:
      if (contains(kDictSafe, name)) return MethodKind::Safe;
      return contains(kDictUnsafe, name) ? MethodKind::Unsafe : MethodKind::Missing;
    case Kind::List:
      if (!v.as_list().view.empty()) return MethodKind::Missing;
      if (v.is_tuple())
        return (name == "count" || name == "index") ? MethodKind::Safe : MethodKind::Missing;
      if (contains(kListSafe, name)) return MethodKind::Safe;
      return contains(kListUnsafe, name) ? MethodKind::Unsafe : MethodKind::Missing;
    default:
      return MethodKind::Missing;
  }
}

Value call_method(Renderer& r, const Value& self, std::string_view name, CallArgs& args) {
  switch (find_method(self, name)) {
    case MethodKind::Missing:
      fail("'" + type_name(self) + "' object has no attribute '" + std::string(name) + "'");
    case MethodKind::Unsafe:
      fail("access to attribute '" + std::string(name) + "' of '" + type_name(self) +
           "' object is unsafe.");
    case MethodKind::Safe:
      break;
  }
  if (self.is_string()) return str_method(r, self.as_string(), name, args);
  if (self.is_dict()) return dict_method(self, name, args);
  return list_method(self, name, args);
}

}  // namespace herd::chat
