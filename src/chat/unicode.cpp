#include "chat/unicode.h"

namespace herd::chat {

char32_t utf8_next(std::string_view s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  }
  bool ok = len != 0 && i + len <= s.size();
  for (int k = 1; ok && k < len; ++k) {
    const unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) ok = false;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Reject overlong forms, surrogates and values beyond U+10FFFF, as Python's decoder does.
  if (ok) {
    static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
  }
  if (!ok) {
    ++i;
    return 0xDC00 + b0;  // surrogateescape
  }
  i += len;
  return cp;
}

std::vector<char32_t> utf8_decode(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) out.push_back(utf8_next(text, i));
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC00));  // an escaped invalid byte
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(const char32_t* cps, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) utf8_append(out, cps[i]);
  return out;
}

std::string utf8_encode(const std::vector<char32_t>& cps) {
  return utf8_encode(cps.data(), cps.size());
}

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t code_point_count(std::string_view text) {
  if (is_ascii(text)) return text.size();
  size_t i = 0, n = 0;
  while (i < text.size()) {
    utf8_next(text, i);
    ++n;
  }
  return n;
}

bool is_py_space(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_py_digit(char32_t c) {
  return c >= '0' && c <= '9';
}

bool is_py_alpha(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  if (c == 0xAA || c == 0xB5 || c == 0xBA) return true;
  if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
  if (c >= 0x370 && c <= 0x3FF) return c != 0x37E && c != 0x387 && c != 0x375;
  if (c >= 0x400 && c <= 0x52F) return !(c >= 0x482 && c <= 0x489);
  if (c >= 0x5D0 && c <= 0x5EA) return true;  // Hebrew letters
  if (c >= 0x620 && c <= 0x64A) return true;  // Arabic letters
  if (c >= 0x3040 && c <= 0x30FF) return c != 0x30FB && c != 0x3099 && c != 0x309A;
  if (c >= 0x4E00 && c <= 0x9FFF) return true;  // CJK ideographs
  if (c >= 0xAC00 && c <= 0xD7A3) return true;  // Hangul syllables
  return false;
}

bool is_py_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F)) return false;
  if (c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xF8FF)) return false;
  if (c >= 0xFFF0 && c <= 0xFFFB) return false;
  if (c == 0xFFFE || c == 0xFFFF || c >= 0xE0000) return false;
  return true;
}

namespace {

// Latin Extended-A pairs uppercase at even code points, except in 0x139..0x148 and
// 0x179..0x17E where the uppercase letter is the odd one.
bool latin_ext_a_upper(char32_t c) {
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return c % 2 == 1;
  return c % 2 == 0;
}

bool in_latin_ext_a(char32_t c) {
  return c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
         c != 0x17F;
}

}  // namespace

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (in_latin_ext_a(c)) return latin_ext_a_upper(c) ? c : c - 1;
  if (c == 0x131) return 'I';
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x460 && c <= 0x4FF && c != 0x482 && !(c >= 0x483 && c <= 0x489) &&
      !(c >= 0x4C0 && c <= 0x4CF)) {
    return c % 2 == 1 ? c - 1 : c;
  }
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;  // fullwidth a-z
  return c;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (in_latin_ext_a(c)) return latin_ext_a_upper(c) ? c + 1 : c;
  if (c == 0x130) return 'i';
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x460 && c <= 0x4FF && c != 0x482 && !(c >= 0x483 && c <= 0x489) &&
      !(c >= 0x4C0 && c <= 0x4CF)) {
    return c % 2 == 0 ? c + 1 : c;
  }
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

bool is_cased_upper(char32_t c) {
  return to_lower(c) != c;
}
bool is_cased_lower(char32_t c) {
  return to_upper(c) != c;
}

std::string str_upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char32_t c = utf8_next(text, i);
    if (c == 0xDF) {
      out += "SS";  // Python's full case mapping of sharp s
    } else {
      utf8_append(out, to_upper(c));
    }
  }
  return out;
}

std::string str_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) utf8_append(out, to_lower(utf8_next(text, i)));
  return out;
}

}  // namespace herd::chat
