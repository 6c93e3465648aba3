#include "chat/py_string.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/unicode.h"

namespace herd::chat {
namespace {

const std::string& want_str(const Value& v, std::string_view function) {
  if (!v.is_string()) fail(std::string(function) + "() argument must be str, not " + type_name(v));
  return v.as_string();
}

// Python's slice.indices() for a sequence of length n.
void adjust_slice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                  int64_t step, int64_t& lo, int64_t& hi) {
  auto clamp = [&](std::optional<int64_t> v, int64_t def_value) {
    if (!v) return def_value;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  lo = clamp(start, step < 0 ? n - 1 : 0);
  hi = clamp(stop, step < 0 ? -1 : n);
}

std::vector<size_t> slice_indices(int64_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step_opt) {
  const int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  int64_t lo, hi;
  adjust_slice(n, start, stop, step, lo, hi);
  std::vector<size_t> out;
  // i stays within [-1, n]; stop before i + step could overflow.
  for (int64_t i = lo; step > 0 ? i < hi : i > hi;) {
    out.push_back(static_cast<size_t>(i));
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return out;
}

}  // namespace

std::string py_pad(std::string_view s, int64_t width, const Value& fill, int where) {
  std::string f = " ";
  if (!fill.is_undefined()) {
    f = want_str(fill, "pad");
    if (code_point_count(f) != 1) fail("The fill character must be exactly one character long");
  }
  const int64_t len = static_cast<int64_t>(code_point_count(s));
  if (width <= len) return std::string(s);
  if (width > (int64_t{1} << 24)) fail("padding width too large");
  const int64_t marg = width - len;
  int64_t left = where < 0 ? 0 : (where > 0 ? marg : marg / 2 + (marg & width & 1));
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += f;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += f;
  return out;
}

// ---------------------------------------------------------------------------------------
// String helpers

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::vector<char32_t> set;
  const bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) set = utf8_decode(want_str(chars, "strip"));
  auto strip_it = [&](char32_t c) {
    return whitespace ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!strip_it(utf8_next(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t i = start;
      const char32_t c = utf8_next(s, i);
      if (i != end || !strip_it(c)) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<Value> py_split(std::string_view s, const Value& sep, int64_t maxsplit,
                            bool from_right) {
  std::vector<Value> out;
  if (sep.is_none() || sep.is_undefined()) {
    // Runs of whitespace separate; leading/trailing whitespace yields no empty strings.
    std::vector<std::pair<size_t, size_t>> words;  // byte ranges
    const std::vector<char32_t> cps = utf8_decode(s);
    std::vector<size_t> offsets(cps.size() + 1, 0);
    {
      size_t i = 0, k = 0;
      while (i < s.size()) {
        offsets[k++] = i;
        utf8_next(s, i);
      }
      offsets[k] = s.size();
    }
    const int64_t n = static_cast<int64_t>(cps.size());
    if (!from_right) {
      int64_t i = 0, splits = 0;
      while (i < n) {
        while (i < n && is_py_space(cps[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          int64_t end = n;
          while (end > i && is_py_space(cps[end - 1])) --end;
          words.emplace_back(offsets[i], offsets[end]);
          break;
        }
        const int64_t start = i;
        while (i < n && !is_py_space(cps[i])) ++i;
        words.emplace_back(offsets[start], offsets[i]);
        ++splits;
      }
    } else {
      int64_t i = n, splits = 0;
      while (i > 0) {
        while (i > 0 && is_py_space(cps[i - 1])) --i;
        if (i <= 0) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          int64_t begin = 0;
          while (begin < i && is_py_space(cps[begin])) ++begin;
          words.emplace_back(offsets[begin], offsets[i]);
          break;
        }
        const int64_t end = i;
        while (i > 0 && !is_py_space(cps[i - 1])) --i;
        words.emplace_back(offsets[i], offsets[end]);
        ++splits;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto [a, b] : words) out.emplace_back(std::string(s.substr(a, b - a)));
    return out;
  }
  const std::string& d = want_str(sep, "split");
  if (d.empty()) fail("empty separator");
  if (!from_right) {
    size_t start = 0;
    int64_t splits = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      const size_t at = s.find(d, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(std::string(s.substr(start, at - start)));
      start = at + d.size();
      ++splits;
    }
    out.emplace_back(std::string(s.substr(start)));
  } else {
    size_t end = s.size();
    int64_t splits = 0;
    std::vector<Value> rev;
    while (maxsplit < 0 || splits < maxsplit) {
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string_view::npos) break;
      rev.emplace_back(std::string(s.substr(at + d.size(), end - at - d.size())));
      end = at;
      ++splits;
    }
    rev.emplace_back(std::string(s.substr(0, end)));
    out.assign(std::make_move_iterator(rev.rbegin()), std::make_move_iterator(rev.rend()));
  }
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t i = 0, line_start = 0;
  while (i < s.size()) {
    const size_t at = i;
    const char32_t c = utf8_next(s, i);
    if (!is_line_break(c)) continue;
    size_t end_of_break = i;
    if (c == '\r' && i < s.size() && s[i] == '\n') end_of_break = ++i;
    out.emplace_back(s.substr(line_start, (keepends ? end_of_break : at) - line_start));
    line_start = end_of_break;
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view replacement,
                       int64_t count, size_t max_bytes) {
  // Size the result first: an empty `old` or a long replacement can multiply the text.
  uint64_t n = 0;
  if (old.empty()) {
    n = code_point_count(s) + 1;
  } else {
    for (size_t at = s.find(old);
         at != std::string_view::npos && (count < 0 || static_cast<int64_t>(n) < count);
         at = s.find(old, at + old.size()))
      ++n;
  }
  if (count >= 0) n = std::min<uint64_t>(n, static_cast<uint64_t>(count));
  const __int128 size = static_cast<__int128>(s.size()) +
                        static_cast<__int128>(n) * replacement.size() -
                        static_cast<__int128>(old.empty() ? 0 : n * old.size());
  if (size > static_cast<__int128>(max_bytes))
    fail("replace() result exceeds " + std::to_string(max_bytes) + " bytes");

  std::string out;
  if (old.empty()) {
    // Inserts the replacement before every character and at the end.
    int64_t done = 0;
    size_t i = 0;
    while (true) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i >= s.size()) break;
      const size_t start = i;
      utf8_next(s, i);
      out += s.substr(start, i - start);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += replacement;
    start = at + old.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = utf8_next(s, i);
    const bool cased = is_cased_upper(c) || is_cased_lower(c);
    utf8_append(out, prev_cased ? to_lower(c) : to_upper(c));
    prev_cased = cased;
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  size_t i = 0;
  bool first = true;
  while (i < s.size()) {
    const char32_t c = utf8_next(s, i);
    utf8_append(out, first ? to_upper(c) : to_lower(c));
    first = false;
  }
  return out;
}

std::string py_slice_string(std::string_view s, std::optional<int64_t> start,
                            std::optional<int64_t> stop, std::optional<int64_t> step) {
  if (is_ascii(s)) {
    std::string out;
    for (size_t i : slice_indices(static_cast<int64_t>(s.size()), start, stop, step))
      out.push_back(s[i]);
    return out;
  }
  const std::vector<char32_t> cps = utf8_decode(s);
  std::string out;
  for (size_t i : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step))
    utf8_append(out, cps[i]);
  return out;
}

std::vector<Value> py_slice_items(const std::vector<Value>& items, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step) {
  std::vector<Value> out;
  for (size_t i : slice_indices(static_cast<int64_t>(items.size()), start, stop, step))
    out.push_back(items[i]);
  return out;
}

std::string py_percent_format(std::string_view fmt, const Value& args, size_t max_bytes) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.as_list().items;
  } else if (args.is_dict()) {
    mapping = &args.as_dict();
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    Value v;
    bool have_value = false;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string_view::npos || !mapping) fail("format requires a mapping");
      const Value* found = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!found) fail("KeyError: '" + std::string(fmt.substr(i + 1, close - i - 1)) + "'");
      v = *found;
      have_value = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
      flags.push_back(fmt[i++]);
    std::string width, precision;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width.push_back(fmt[i++]);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = "";
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision.push_back(fmt[i++]);
      if (precision.empty()) precision = "0";
    }
    if (i >= fmt.size()) fail("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!have_value) {
      if (next >= positional.size()) fail("not enough arguments for format string");
      v = positional[next++];
    }
    if (width.size() > 6 || precision.size() > 3) fail("format width too large");
    const std::string spec = "%" + flags + width + (precision.empty() ? "" : "." + precision);
    char buf[512];
    std::string text;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        text = conv == 's' ? to_str(v) : repr(v);
        if (!precision.empty())
          text = py_slice_string(text, std::nullopt, std::stoll(precision), std::nullopt);
        const int64_t w = width.empty() ? 0 : std::stoll(width);
        text = py_pad(text, w, Value(" "), flags.find('-') != std::string::npos ? -1 : 1);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number())
          fail("%" + std::string(1, conv) + " format: a real number is required, not " +
               type_name(v));
        if (v.is_float() && !(std::fabs(v.as_float()) < 9.2e18))
          fail("cannot convert float to integer");
        const long long n = v.is_float() ? static_cast<long long>(v.as_float()) : v.as_int();
        const char c = conv == 'i' || conv == 'u' ? 'd' : conv;
        std::snprintf(buf, sizeof(buf), (spec + "ll" + c).c_str(), n);
        text = buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v.is_number()) fail("must be real number, not " + type_name(v));
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), v.as_float());
        text = buf;
        break;
      }
      case 'c':
        text = to_str(v);
        break;
      default:
        fail(std::string("unsupported format character '") + conv + "'");
    }
    out += text;
    if (out.size() > max_bytes)
      fail("formatted string exceeds " + std::to_string(max_bytes) + " bytes");
  }
  if (!mapping && next < positional.size())
    fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace herd::chat
