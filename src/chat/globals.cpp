#include "chat/globals.h"

#include <ctime>

#include "chat/objects.h"
#include "chat/operators.h"
#include "chat/renderer.h"

namespace herd::chat {
namespace {

// Jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

int64_t int_arg(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  fail("'" + type_name(v) + "' object cannot be interpreted as an integer");
}

Value range(Renderer& r, CallArgs& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    fail("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0]);
  } else {
    start = int_arg(p[0]);
    stop = int_arg(p[1]);
    if (p.size() == 3) step = int_arg(p[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Count without overflow: the number of values start + k*step in [start, stop).
  __int128 span = static_cast<__int128>(stop) - start;
  __int128 count = 0;
  if (step > 0 && span > 0) count = (span + step - 1) / step;
  if (step < 0 && span < 0)
    count = (-span + (-static_cast<__int128>(step)) - 1) / -static_cast<__int128>(step);
  if (count > kMaxRange)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) out.emplace_back(start + k * step);
  r.step(out.size());
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...): Python's dict() constructor.
Dict dict_from_args(const CallArgs& args, const char* function) {
  if (args.positional.size() > 1)
    fail(std::string(function) + " expected at most 1 argument, got " +
         std::to_string(args.positional.size()));
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_undefined()) undefined_error(src);  // dict() asks it for .keys
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict().entries()) d.set(k, v);
    } else {
      const auto pairs = py_iterate(src);  // named: the loop must not outlive it
      for (const auto& pair : pairs->items) {
        const auto kv = py_iterate(pair);
        if (kv->items.size() != 2)
          fail("dictionary update sequence element has length " + std::to_string(kv->items.size()) +
               "; 2 is required");
        d.set(kv->items[0], kv->items[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value(k), v);
  return d;
}

std::string strftime_text(const std::tm& tm, const std::string& format) {
  // Python handles %f, %z and %Z itself; a naive datetime has 0 microseconds and no zone.
  std::string f;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      if (c == 'f') {
        f += "000000";
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      f += format.substr(i, 2);
      ++i;
      continue;
    }
    f.push_back(format[i]);
  }
  f.push_back('\x01');  // so that an empty result is distinguishable from an error
  std::vector<char> buf(f.size() * 8 + 64);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const size_t n = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
    if (n > 0) return std::string(buf.data(), n - 1);
    buf.resize(buf.size() * 4);
  }
  fail("strftime_now: format produced too much output");
}

}  // namespace

std::optional<Value> make_global(std::string_view name) {
  if (name == "range") return make_function("range", range);
  if (name == "dict") {
    return make_function("dict", [](Renderer&, CallArgs& args) {
      return Value(std::make_shared<const Dict>(dict_from_args(args, "dict")));
    });
  }
  if (name == "namespace") {
    return make_function("namespace", [](Renderer& r, CallArgs& args) {
      return r.make_namespace(dict_from_args(args, "namespace"));
    });
  }
  if (name == "raise_exception") {
    return make_function("raise_exception", [](Renderer&, CallArgs& args) -> Value {
      auto p = bind_args(args, "raise_exception", {"message"});
      if (!p[0]) fail("raise_exception() missing 1 required positional argument: 'message'");
      throw TemplateRaised(to_str(*p[0]));
    });
  }
  if (name == "strftime_now") {
    return make_function("strftime_now", [](Renderer& r, CallArgs& args) -> Value {
      auto p = bind_args(args, "strftime_now", {"format"});
      if (!p[0] || !p[0]->is_string()) fail("strftime_now() argument must be str");
      const std::string& format = p[0]->as_string();
      if (format.size() > 4096) fail("strftime_now() format too long");
      return Value(strftime_text(r.now(), format));
    });
  }
  if (name == "joiner") {
    return make_function("joiner", [](Renderer&, CallArgs& args) -> Value {
      auto p = bind_args(args, "joiner", {"sep"});
      const std::string sep = p[0] ? to_str(*p[0]) : ", ";
      auto used = std::make_shared<bool>(false);
      return make_function("joiner", [sep, used](Renderer&, CallArgs&) -> Value {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return Value(sep);
      });
    });
  }
  return std::nullopt;
}

}  // namespace herd::chat
