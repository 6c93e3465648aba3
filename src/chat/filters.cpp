#include "chat/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "chat/json_dump.h"
#include "chat/methods.h"
#include "chat/objects.h"
#include "chat/operators.h"
#include "chat/py_string.h"
#include "chat/renderer.h"
#include "chat/unicode.h"

namespace herd::chat {
namespace {

using Args = std::vector<std::optional<Value>>;

Value arg_or(const std::optional<Value>& v, Value fallback) {
  return v ? *v : std::move(fallback);
}

// Jinja2's soft_str: str() of the value, but Markup stays Markup.
Value soft_str(const Value& v) {
  if (v.is_string()) return v;
  return Value(to_str(v));
}

Value same_markup(const Value& like, std::string s) {
  return like.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

int64_t int_param(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) {
    const double d = v.as_float();
    if (!(std::fabs(d) < 9.2e18)) fail(std::string(what) + " out of range");  // also NaN
    return static_cast<int64_t>(d);
  }
  fail(std::string(what) + " must be an integer, not " + type_name(v));
}

// ---- attribute getters (make_attrgetter) ----------------------------------------------

struct AttrGetter {
  std::vector<Value> parts;  // empty: identity
  std::optional<Value> fallback;
  bool ignore_case = false;

  Value operator()(Renderer& r, Value item) const {
    for (const auto& part : parts) {
      item = r.getitem(item, part);
      if (fallback && item.is_undefined()) item = *fallback;
    }
    if (ignore_case && item.is_string()) return Value(str_lower(item.as_string()));
    return item;
  }
};

std::vector<Value> attribute_parts(const Value& attribute) {
  std::vector<Value> parts;
  if (attribute.is_none() || attribute.is_undefined()) return parts;
  if (!attribute.is_string()) return {attribute};
  for (const auto& p : py_split(attribute.as_string(), Value("."), -1, false)) {
    const std::string& s = p.as_string();
    const bool digits =
        !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    parts.push_back(digits && s.size() < 18 ? Value(static_cast<int64_t>(std::stoll(s))) : p);
  }
  return parts;
}

AttrGetter make_getter(const std::optional<Value>& attribute, bool ignore_case,
                       std::optional<Value> fallback = std::nullopt) {
  AttrGetter g;
  if (attribute) g.parts = attribute_parts(*attribute);
  g.ignore_case = ignore_case;
  if (fallback && !fallback->is_none()) g.fallback = std::move(fallback);
  return g;
}

std::vector<Value> items_of(Renderer& r, const Value& v) {
  auto list = py_iterate(v);
  r.step(list->items.size());
  return list->items;
}

void sort_values(std::vector<Value>& keys_and_items_keys, std::vector<size_t>& order,
                 bool reverse) {
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? py_compare(keys_and_items_keys[b], keys_and_items_keys[a]) < 0
                   : py_compare(keys_and_items_keys[a], keys_and_items_keys[b]) < 0;
  });
}

// ---- filters --------------------------------------------------------------------------

Value f_default(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "default", {"default_value", "boolean"});
  const bool boolean = p[1] && truthy(*p[1]);
  if (in.is_undefined() || (boolean && !truthy(in))) return arg_or(p[0], Value(""));
  return in;
}

Value f_length(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "length", {});
  return Value(py_len(in));
}

Value f_trim(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "trim", {"chars"});
  const Value s = soft_str(in);
  return same_markup(s, py_strip(s.as_string(), arg_or(p[0], Value::none()), true, true));
}

Value f_upper(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "upper", {});
  const Value s = soft_str(in);
  return same_markup(s, str_upper(s.as_string()));
}

Value f_lower(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "lower", {});
  const Value s = soft_str(in);
  return same_markup(s, str_lower(s.as_string()));
}

Value f_capitalize(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "capitalize", {});
  const Value s = soft_str(in);
  return same_markup(s, py_capitalize(s.as_string()));
}

// Jinja2's title: every run split by [-\s({\[<] gets its first character upper-cased and
// the rest lower-cased (not Python's str.title()).
Value f_title(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "title", {});
  const Value s = soft_str(in);
  const std::string& text = s.as_string();
  std::string out;
  bool at_word_start = true;
  size_t i = 0;
  while (i < text.size()) {
    const char32_t c = utf8_next(text, i);
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_py_space(c);
    if (sep) {
      utf8_append(out, c);
      at_word_start = true;
    } else {
      utf8_append(out, at_word_start ? to_upper(c) : to_lower(c));
      at_word_start = false;
    }
  }
  return same_markup(s, std::move(out));
}

Value f_first(Renderer& r, const Value& in, CallArgs& a) {
  bind_args(a, "first", {});
  if (in.is_list()) {
    if (in.as_list().items.empty()) return Value::undefined("No first item, sequence was empty.");
    return in.as_list().items.front();
  }
  auto items = items_of(r, in);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Renderer& r, const Value& in, CallArgs& a) {
  bind_args(a, "last", {});
  if (in.is_object()) fail("'" + type_name(in) + "' object is not reversible");
  auto items = items_of(r, in);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "join", {"d", "attribute"});
  const std::string sep = p[0] ? to_str(*p[0]) : "";
  const AttrGetter get = make_getter(p[1], false);
  std::string out;
  bool first = true;
  for (const auto& item : items_of(r, in)) {
    if (!first) out += sep;
    first = false;
    out += to_str(get(r, item));
    r.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_replace(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "replace", {"old", "new", "count"});
  if (!p[0] || !p[1]) fail("replace() missing required arguments 'old' and 'new'");
  const int64_t count = (p[2] && !p[2]->is_none()) ? int_param(*p[2], "count") : -1;
  std::string out =
      py_replace(to_str(in), to_str(*p[0]), to_str(*p[1]), count, r.options().max_output_bytes);
  r.check_size(out.size());
  return Value(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Value f_tojson(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = p[0] && truthy(*p[0]);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) {
      o.indent = p[1]->as_string();
    } else {
      const int64_t n = int_param(*p[1], "indent");
      if (n > 1000) fail("tojson indent too large");
      o.indent = std::string(n > 0 ? static_cast<size_t>(n) : 0, ' ');
    }
  }
  if (p[2] && !p[2]->is_none()) {
    const auto seps = py_iterate(*p[2]);
    if (seps->items.size() != 2 || !seps->items[0].is_string() || !seps->items[1].is_string())
      fail("tojson separators must be a pair of strings");
    o.item_separator = seps->items[0].as_string();
    o.key_separator = seps->items[1].as_string();
  }
  o.sort_keys = p[3] && truthy(*p[3]);
  o.max_bytes = r.options().max_output_bytes;
  std::string out = json_dumps(in, o);
  r.check_size(out.size());
  r.step(out.size() / 64);
  return Value(std::move(out));
}

Value f_string(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "string", {});
  return soft_str(in);
}

// Python int(str): optional sign, digits with single underscores, surrounding whitespace.
std::optional<int64_t> parse_int(std::string_view s, int base) {
  std::string t = py_strip(s, Value::none(), true, true);
  std::string digits;
  size_t i = 0;
  bool negative = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) negative = t[i++] == '-';
  if (base == 16 && t.compare(i, 2, "0x") == 0) i += 2;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && !digits.empty() && i + 1 < t.size() && t[i + 1] != '_') continue;
    digits.push_back(t[i]);
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE || digits[0] == '+' || digits[0] == '-' || digits[0] == ' ')
    return std::nullopt;
  return negative ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  std::string t = py_strip(s, Value::none(), true, true);
  if (t.empty()) return std::nullopt;
  std::string lower = str_lower(t);
  size_t sign = (lower[0] == '+' || lower[0] == '-') ? 1 : 0;
  const std::string body = lower.substr(sign);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  for (char c : body)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '+' || c == '-' || c == '_'))
      return std::nullopt;
  std::string clean;
  for (char c : t)
    if (c != '_') clean.push_back(c);
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

Value f_int(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "int", {"default", "base"});
  const Value fallback = arg_or(p[0], Value(int64_t{0}));
  const int64_t base = p[1] ? int_param(*p[1], "base") : 10;
  if (in.is_undefined()) undefined_error(in);
  if (in.is_int() || in.is_bool()) return Value(in.as_int());
  if (in.is_float()) {
    const double d = in.as_float();
    if (std::isnan(d) || std::isinf(d) || std::fabs(d) >= 9.2e18)
      fail("cannot convert float to integer");
    return Value(static_cast<int64_t>(d));
  }
  if (in.is_string()) {
    if (base >= 2 && base <= 36)
      if (auto v = parse_int(in.as_string(), static_cast<int>(base))) return Value(*v);
    if (auto d = parse_float(in.as_string())) {
      if (std::isnan(*d) || std::isinf(*d) || std::fabs(*d) >= 9.2e18)
        fail("cannot convert float to integer");
      return Value(static_cast<int64_t>(*d));
    }
  }
  return fallback;
}

Value f_float(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "float", {"default"});
  if (in.is_undefined()) undefined_error(in);
  if (in.is_number()) return Value(in.as_float());
  if (in.is_string())
    if (auto d = parse_float(in.as_string())) return Value(*d);
  return arg_or(p[0], Value(0.0));
}

Value f_list(Renderer& r, const Value& in, CallArgs& a) {
  bind_args(a, "list", {});
  return Value::list(items_of(r, in));
}

Value f_items(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "items", {});
  if (in.is_undefined()) return make_generator("generator", {});
  if (!in.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, v] : in.as_dict().entries()) out.push_back(Value::tuple({k, v}));
  return make_generator("generator", std::move(out));
}

Value f_dictsort(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "dictsort", {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = p[0] && truthy(*p[0]);
  const std::string by = p[1] ? to_str(*p[1]) : "key";
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  if (in.is_undefined()) undefined_error(in);
  if (!in.is_dict()) fail("'" + type_name(in) + "' object has no attribute 'items'");
  std::vector<Value> items, keys;
  std::vector<size_t> order;
  for (const auto& [k, v] : in.as_dict().entries()) {
    items.push_back(Value::tuple({k, v}));
    Value key = by == "key" ? k : v;
    if (!case_sensitive && key.is_string()) key = Value(str_lower(key.as_string()));
    keys.push_back(std::move(key));
    order.push_back(order.size());
  }
  sort_values(keys, order, p[2] && truthy(*p[2]));
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return Value::list(std::move(out));
}

bool run_test(Renderer& r, const Value& name, const Value& item, const std::vector<Value>& extra,
              const std::vector<std::pair<std::string, Value>>& kwargs) {
  if (!name.is_string()) fail("test name must be a string");
  TestFn t = find_test(name.as_string());
  if (!t) fail("no test named '" + name.as_string() + "'");
  CallArgs args{extra, kwargs};
  return t(r, item, args);
}

// select / reject / selectattr / rejectattr.
Value select_or_reject(Renderer& r, const Value& in, CallArgs& a, bool select, bool by_attr) {
  std::vector<Value> out;
  if (!truthy(in)) return make_generator("generator", {});
  size_t off = 0;
  AttrGetter get;
  if (by_attr) {
    if (a.positional.empty()) fail("Missing parameter for attribute name");
    get = make_getter(a.positional[0], false);
    off = 1;
  }
  const bool has_test = a.positional.size() > off;
  std::vector<Value> extra;
  for (size_t i = off + 1; i < a.positional.size(); ++i) extra.push_back(a.positional[i]);
  for (const auto& item : items_of(r, in)) {
    const Value v = get(r, item);
    const bool ok = has_test ? run_test(r, a.positional[off], v, extra, a.keyword) : truthy(v);
    if (ok == select) out.push_back(item);
  }
  return make_generator("generator", std::move(out));
}

Value f_select(Renderer& r, const Value& in, CallArgs& a) {
  return select_or_reject(r, in, a, true, false);
}
Value f_reject(Renderer& r, const Value& in, CallArgs& a) {
  return select_or_reject(r, in, a, false, false);
}
Value f_selectattr(Renderer& r, const Value& in, CallArgs& a) {
  return select_or_reject(r, in, a, true, true);
}
Value f_rejectattr(Renderer& r, const Value& in, CallArgs& a) {
  return select_or_reject(r, in, a, false, true);
}

Value f_map(Renderer& r, const Value& in, CallArgs& a) {
  if (!truthy(in)) return make_generator("generator", {});
  std::vector<Value> out;
  const bool by_attribute =
      a.positional.empty() && std::any_of(a.keyword.begin(), a.keyword.end(),
                                          [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Args p = bind_args(a, "map", {"attribute", "default"});
    const AttrGetter get = make_getter(p[0], false, p[1]);
    for (const auto& item : items_of(r, in)) out.push_back(get(r, item));
    return make_generator("generator", std::move(out));
  }
  if (a.positional.empty()) fail("map requires a filter argument");
  if (!a.positional[0].is_string()) fail("map filter name must be a string");
  FilterFn f = find_filter(a.positional[0].as_string());
  if (!f) fail("no filter named '" + a.positional[0].as_string() + "'");
  std::vector<Value> extra(a.positional.begin() + 1, a.positional.end());
  for (const auto& item : items_of(r, in)) {
    CallArgs args{extra, a.keyword};
    out.push_back(f(r, item, args));
  }
  return make_generator("generator", std::move(out));
}

Value f_unique(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "unique", {"case_sensitive", "attribute"});
  const AttrGetter get = make_getter(p[1], !(p[0] && truthy(*p[0])));
  std::vector<Value> out, seen;
  for (const auto& item : items_of(r, in)) {
    const Value key = get(r, item);
    if (!is_hashable(key)) fail("unhashable type: '" + type_name(key) + "'");
    bool found = false;
    for (const auto& s : seen) {
      if (py_equal(s, key)) {
        found = true;
        break;
      }
    }
    r.step(seen.size() / 16);
    if (!found) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return make_generator("generator", std::move(out));
}

Value f_sort(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = p[0] && truthy(*p[0]);
  const bool ignore_case = !(p[1] && truthy(*p[1]));
  std::vector<Value> items = items_of(r, in);
  std::vector<Value> keys;
  if (p[2] && p[2]->is_string() && p[2]->as_string().find(',') != std::string::npos) {
    // Several attributes: compare tuples of them.
    std::vector<AttrGetter> getters;
    for (const auto& part : py_split(p[2]->as_string(), Value(","), -1, false))
      getters.push_back(make_getter(part, ignore_case));
    for (const auto& item : items) {
      std::vector<Value> k;
      for (const auto& g : getters) k.push_back(g(r, item));
      keys.push_back(Value::list(std::move(k)));
    }
  } else {
    const AttrGetter get = make_getter(p[2], ignore_case);
    for (const auto& item : items) keys.push_back(get(r, item));
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  sort_values(keys, order, reverse);
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_reverse(Renderer& r, const Value& in, CallArgs& a) {
  bind_args(a, "reverse", {});
  if (in.is_string())
    return same_markup(in, py_slice_string(in.as_string(), std::nullopt, std::nullopt, -1));
  std::vector<Value> items = items_of(r, in);
  std::reverse(items.begin(), items.end());
  if (in.is_list()) return make_generator("list_reverseiterator", std::move(items));
  if (in.is_dict()) return make_generator("dict_reversekeyiterator", std::move(items));
  return Value::list(std::move(items));
}

Value f_indent(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "indent", {"width", "first", "blank"});
  std::string indention;
  if (p[0] && p[0]->is_string()) {
    indention = p[0]->as_string();
  } else {
    const int64_t w = p[0] ? int_param(*p[0], "width") : 4;
    if (w > 10000) fail("indent width too large");
    indention.assign(w > 0 ? static_cast<size_t>(w) : 0, ' ');
  }
  const bool first = p[1] && truthy(*p[1]);
  const bool blank = p[2] && truthy(*p[2]);
  if (!in.is_string()) fail("indent filter expects a string, not " + type_name(in));
  const std::vector<std::string> lines = py_splitlines(in.as_string() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    r.check_size(out.size());
  }
  if (first) out = indention + out;
  return same_markup(in, std::move(out));
}

Value f_safe(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "safe", {});
  if (in.is_markup()) return in;
  return Value::markup(to_str(in));
}

Value f_escape(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "escape", {});
  if (in.is_markup()) return in;
  return Value::markup(html_escape(to_str(in)));
}

Value f_forceescape(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "forceescape", {});
  return Value::markup(html_escape(to_str(in)));
}

Value f_wordcount(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "wordcount", {});
  const std::string s = to_str(in);
  int64_t n = 0;
  bool in_word = false;
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = utf8_next(s, i);
    const bool w = is_py_alpha(c) || is_py_digit(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_abs(Renderer&, const Value& in, CallArgs& a) {
  bind_args(a, "abs", {});
  if (in.is_float()) return Value(std::fabs(in.as_float()));
  if (in.is_int() || in.is_bool()) {
    if (in.as_int() == INT64_MIN) fail("integer result too large");
    return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
  }
  if (in.is_undefined()) undefined_error(in);
  fail("bad operand type for abs(): '" + type_name(in) + "'");
}

Value f_round(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "round", {"precision", "method"});
  const int64_t precision = p[0] ? int_param(*p[0], "precision") : 0;
  const std::string method = p[1] ? to_str(*p[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be common, ceil or floor");
  if (in.is_undefined()) undefined_error(in);
  if (!in.is_number()) fail("type " + type_name(in) + " doesn't define __round__ method");
  if (precision < -300 || precision > 300) fail("round precision out of range");
  if (method == "common") {
    if (!in.is_float()) return Value(in.as_int());  // precision >= 0 keeps ints unchanged
    const double x = in.as_float();
    if (std::isnan(x) || std::isinf(x)) return Value(x);
    if (precision <= 0) {
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value(std::nearbyint(x / scale) * scale);
    }
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = in.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value min_or_max(Renderer& r, const Value& in, CallArgs& a, bool want_max) {
  Args p = bind_args(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const AttrGetter get = make_getter(p[1], !(p[0] && truthy(*p[0])));
  const std::vector<Value> items = items_of(r, in);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = get(r, items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = get(r, items[i]);
    const int c = py_compare(k, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value f_min(Renderer& r, const Value& in, CallArgs& a) {
  return min_or_max(r, in, a, false);
}
Value f_max(Renderer& r, const Value& in, CallArgs& a) {
  return min_or_max(r, in, a, true);
}

Value f_sum(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "sum", {"attribute", "start"});
  const AttrGetter get = make_getter(p[0], false);
  Value total = arg_or(p[1], Value(int64_t{0}));
  for (const auto& item : items_of(r, in)) total = binary_op(r, BinOp::Add, total, get(r, item));
  return total;
}

Value f_batch(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "batch", {"linecount", "fill_with"});
  if (!p[0]) fail("batch() missing required argument 'linecount'");
  const int64_t n = int_param(*p[0], "linecount");
  if (n <= 0) fail("batch linecount must be positive");
  if (n > 10'000'000) fail("batch linecount too large");
  std::vector<Value> out, row;
  for (const auto& item : items_of(r, in)) {
    if (static_cast<int64_t>(row.size()) == n) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
    row.push_back(item);
  }
  if (!row.empty()) {
    if (p[1] && !p[1]->is_none())
      while (static_cast<int64_t>(row.size()) < n) row.push_back(*p[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return make_generator("generator", std::move(out));
}

Value f_center(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "center", {"width"});
  CallArgs args;
  args.positional.push_back(arg_or(p[0], Value(int64_t{80})));
  return call_method(r, Value(to_str(in)), "center", args);
}

Value f_truncate(Renderer&, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "truncate", {"length", "killwords", "end", "leeway"});
  const std::string s = to_str(in);
  const int64_t length = p[0] ? int_param(*p[0], "length") : 255;
  const bool killwords = p[1] && truthy(*p[1]);
  const std::string end = p[2] ? to_str(*p[2]) : "...";
  const int64_t leeway = (p[3] && !p[3]->is_none()) ? int_param(*p[3], "leeway") : 5;
  const int64_t end_len = static_cast<int64_t>(code_point_count(end));
  if (length < end_len)
    fail("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) fail("expected leeway >= 0, got " + std::to_string(leeway));
  if (static_cast<int64_t>(code_point_count(s)) <= length + leeway) return Value(s);
  std::string head = py_slice_string(s, std::nullopt, length - end_len, std::nullopt);
  if (killwords) return Value(head + end);
  const auto parts = py_split(head, Value(" "), 1, true);
  return Value(parts[0].as_string() + end);
}

Value f_format(Renderer& r, const Value& in, CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty())
    fail("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.keyword.empty()) {
    auto d = std::make_shared<Dict>();
    for (const auto& [k, v] : a.keyword) d->set(Value(k), v);
    args = Value(std::shared_ptr<const Dict>(std::move(d)));
  } else {
    args = Value::tuple(a.positional);
  }
  std::string out = py_percent_format(to_str(in), args, r.options().max_output_bytes);
  r.check_size(out.size());
  return Value(std::move(out));
}

Value f_attr(Renderer& r, const Value& in, CallArgs& a) {
  Args p = bind_args(a, "attr", {"name"});
  if (!p[0] || !p[0]->is_string()) fail("attr() requires an attribute name");
  return r.getattr(in, p[0]->as_string());
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", f_abs},           {"attr", f_attr},
      {"batch", f_batch},       {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},
      {"d", f_default},         {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape},
      {"escape", f_escape},     {"first", f_first},
      {"float", f_float},       {"forceescape", f_forceescape},
      {"format", f_format},     {"indent", f_indent},
      {"int", f_int},           {"items", f_items},
      {"join", f_join},         {"last", f_last},
      {"length", f_length},     {"list", f_list},
      {"lower", f_lower},       {"map", f_map},
      {"max", f_max},           {"min", f_min},
      {"reject", f_reject},     {"rejectattr", f_rejectattr},
      {"replace", f_replace},   {"reverse", f_reverse},
      {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr},
      {"sort", f_sort},         {"string", f_string},
      {"sum", f_sum},           {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},
      {"truncate", f_truncate}, {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  const auto& t = filter_table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace herd::chat
