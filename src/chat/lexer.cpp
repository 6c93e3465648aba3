#include "chat/lexer.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "chat/unicode.h"
#include "chat/value.h"

namespace herd::chat {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Python's str.rstrip() (Unicode whitespace).
std::string_view rstrip_py(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_py_space(utf8_next(s, i)) || i != end) break;
    end = start;
  }
  return s.substr(0, end);
}

// Length of the run of regex \s at s[pos...].
size_t space_run(std::string_view s, size_t pos) {
  size_t i = pos;
  while (i < s.size()) {
    size_t next = i;
    if (!is_py_space(utf8_next(s, next))) break;
    i = next;
  }
  return i - pos;
}

// Newlines normalised to "\n" and one trailing newline dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_source(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(std::string_view(src_).substr(pos_), src_.size());
        break;
      }
      lex_tag(tag);
    }
    tokens_.push_back(Token{TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t i = from;
    while ((i = src_.find('{', i)) != std::string::npos) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
      ++i;
    }
    return std::string::npos;
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += src_[i] == '\n';
  }

  // Emits src_[pos_, end) as `text` (possibly stripped) and moves pos_ to end.
  void emit_text(std::string_view text, size_t end) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::Text, std::string(text), line_});
    count_lines(pos_, end);
    pos_ = end;
  }

  // The text before a tag, with "-" stripping and lstrip_blocks applied.
  std::string_view strip_before(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') return rstrip_py(text);
    if (sign != '+' && !is_variable) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        if (text.find_first_not_of(" \t", l_pos) == std::string_view::npos)
          return text.substr(0, l_pos);
      }
    }
    return text;
  }

  // If a raw-begin tag `{%[-+]? raw [-]?%}` starts at `tag`, returns its length.
  size_t raw_begin_length(size_t tag) const {
    size_t i = tag + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i += space_run(src_, i);
    if (src_.compare(i, 3, "raw") != 0) return 0;
    i += 3;
    const size_t ws = space_run(src_, i);
    i += ws;
    if (src_.compare(i, 3, "-%}") == 0) return i + 3 + space_run(src_, i + 3) - tag;
    if (src_.compare(i, 2, "%}") == 0) return i + 2 - tag;
    return 0;
  }

  void lex_tag(size_t tag) {
    const char kind = src_[tag + 1];
    char sign = 0;
    if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+'))
      sign = src_[tag + 2];
    const std::string_view before = std::string_view(src_).substr(pos_, tag - pos_);
    emit_text(strip_before(before, sign, kind == '{'), tag);
    const size_t body = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      lex_comment(body);
    } else if (kind == '%' && raw_begin_length(tag) != 0) {
      lex_raw(tag, tag + raw_begin_length(tag));
    } else {
      lex_code(kind == '%', body);
    }
  }

  // After a closing "-X}" / "+X}" / "X}" at [close, close_end): applies the suffix rule and
  // sets line_starting_ from the last character consumed.
  void finish_tag(size_t close_begin, size_t after_close, char modifier, bool trim_newline) {
    size_t end = after_close;
    if (modifier == '-') {
      end += space_run(src_, end);
    } else if (modifier != '+' && trim_newline && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    count_lines(pos_, end);
    pos_ = end;
    (void)close_begin;
  }

  void lex_comment(size_t body) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) fail_at(line_, "Missing end of comment tag");
    char modifier = 0;
    if (close > body && (src_[close - 1] == '-' || src_[close - 1] == '+'))
      modifier = src_[close - 1];
    finish_tag(close, close + 2, modifier, true);
  }

  void lex_raw(size_t tag, size_t content) {
    count_lines(pos_, content);
    pos_ = content;
    line_starting_ = content > 0 && src_[content - 1] == '\n';
    // Find "{%[-+]? endraw [-+]?%}".
    size_t search = content;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail_at(line_, "Missing end of raw directive");
      size_t i = open + 2;
      char sign = 0;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
      i += space_run(src_, i);
      if (src_.compare(i, 6, "endraw") == 0) {
        i += 6;
        i += space_run(src_, i);
        char modifier = 0;
        if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) modifier = src_[i++];
        if (src_.compare(i, 2, "%}") == 0) {
          const std::string_view text = std::string_view(src_).substr(content, open - content);
          emit_text(strip_before(text, sign, false), open);
          finish_tag(i, i + 2, modifier, true);
          return;
        }
      }
      search = open + 2;
    }
    (void)tag;
  }

  void lex_code(bool is_block, size_t body) {
    tokens_.push_back(
        Token{is_block ? TokenType::BlockBegin : TokenType::VariableBegin, "", line_});
    count_lines(pos_, body);
    pos_ = body;
    std::string balance;  // expected closing brackets
    while (true) {
      if (pos_ >= src_.size()) fail_at(line_, "unexpected end of template inside a tag");
      const char c = src_[pos_];
      if (balance.empty() && try_close(is_block)) return;
      if (is_ascii_space(c)) {
        line_ += c == '\n';
        ++pos_;
        continue;
      }
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c) || static_cast<unsigned char>(c) >= 0x80) {
        lex_name();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(balance);
      }
    }
  }

  bool try_close(bool is_block) {
    const char closer = is_block ? '%' : '}';
    const size_t p = pos_;
    char modifier = 0;
    size_t q = p;
    if (src_[q] == '-' || (is_block && src_[q] == '+')) modifier = src_[q++];
    if (q + 1 < src_.size() && src_[q] == closer && src_[q + 1] == '}') {
      tokens_.push_back(Token{is_block ? TokenType::BlockEnd : TokenType::VariableEnd, "", line_});
      finish_tag(q, q + 2, modifier, is_block);
      return true;
    }
    return false;
  }

  void lex_number() {
    const size_t start = pos_;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    auto digits = [&](size_t i) {  // (\d+_)*\d+ starting at i; returns end or i
      size_t j = i;
      while (j < src_.size() && is_digit(src_[j])) {
        while (j < src_.size() && is_digit(src_[j])) ++j;
        if (j + 1 < src_.size() && src_[j] == '_' && is_digit(src_[j + 1])) ++j;
      }
      return j;
    };
    size_t int_end = digits(start);
    size_t float_end = 0;
    if (!after_dot) {
      size_t i = int_end;
      if (i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1])) i = digits(i + 1);
      size_t e = i;
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t k = e + 1;
        if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
        if (k < src_.size() && is_digit(src_[k])) i = digits(k);
      }
      if (i != int_end) float_end = i;
    }
    std::string text;
    if (float_end) {
      for (size_t i = start; i < float_end; ++i)
        if (src_[i] != '_') text.push_back(src_[i]);
      Token t{TokenType::Float, text, line_};
      t.float_value = std::strtod(text.c_str(), nullptr);
      tokens_.push_back(t);
      pos_ = float_end;
      return;
    }
    // Integers: 0x / 0o / 0b prefixes, otherwise decimal (a leading zero only as "0").
    int base = 10;
    size_t i = start;
    if (src_[start] == '0' && start + 1 < src_.size()) {
      const char p = static_cast<char>(src_[start + 1] | 0x20);
      if (p == 'x' || p == 'o' || p == 'b') {
        base = p == 'x' ? 16 : (p == 'o' ? 8 : 2);
        i = start + 2;
        int_end = i;
        while (int_end < src_.size() &&
               (std::isxdigit(static_cast<unsigned char>(src_[int_end])) || src_[int_end] == '_'))
          ++int_end;
      } else {
        int_end = start + 1;
        while (int_end < src_.size() && (src_[int_end] == '0' || src_[int_end] == '_')) ++int_end;
      }
    }
    for (size_t k = i; k < int_end; ++k)
      if (src_[k] != '_') text.push_back(src_[k]);
    if (text.empty()) fail_at(line_, "invalid integer literal");
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, base);
    if (errno == ERANGE || *end != '\0') fail_at(line_, "integer literal out of range: " + text);
    Token t{TokenType::Integer, text, line_};
    t.int_value = v;
    tokens_.push_back(t);
    pos_ = int_end;
  }

  void lex_name() {
    const size_t start = pos_;
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (is_name_start(c) || is_digit(c)) {
        ++pos_;
        continue;
      }
      if (static_cast<unsigned char>(c) >= 0x80) {
        size_t next = pos_;
        if (is_py_alpha(utf8_next(src_, next))) {
          pos_ = next;
          continue;
        }
      }
      break;
    }
    if (pos_ == start) fail_at(line_, "unexpected character in tag");
    tokens_.push_back(Token{TokenType::Name, src_.substr(start, pos_ - start), line_});
  }

  void lex_string(char quote) {
    const int line = line_;
    std::string value;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) fail_at(line, "unterminated string");
      const char c = src_[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        value.push_back(c);
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) fail_at(line, "unterminated string");
      i = unescape(i, value);
    }
    tokens_.push_back(Token{TokenType::String, std::move(value), line});
    pos_ = i + 1;
  }

  // Python's "unicode-escape" decoding of the escape at src_[i] == '\\'; returns the index
  // after it.
  size_t unescape(size_t i, std::string& out) {
    const char e = src_[i + 1];
    auto hex = [&](size_t from, int n, char32_t& cp) {
      cp = 0;
      for (int k = 0; k < n; ++k) {
        if (from + k >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[from + k])))
          fail_at(line_, "truncated \\" + std::string(1, e) + " escape in string");
        const char h = src_[from + k];
        cp = cp * 16 + (is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
    };
    char32_t cp = 0;
    switch (e) {
      case '\n':
        ++line_;
        return i + 2;
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        return i + 2;
      case 'a':
        out.push_back('\a');
        return i + 2;
      case 'b':
        out.push_back('\b');
        return i + 2;
      case 'f':
        out.push_back('\f');
        return i + 2;
      case 'n':
        out.push_back('\n');
        return i + 2;
      case 'r':
        out.push_back('\r');
        return i + 2;
      case 't':
        out.push_back('\t');
        return i + 2;
      case 'v':
        out.push_back('\v');
        return i + 2;
      case 'x':
        hex(i + 2, 2, cp);
        utf8_append(out, cp);
        return i + 4;
      case 'u':
        hex(i + 2, 4, cp);
        utf8_append(out, cp);
        return i + 6;
      case 'U':
        hex(i + 2, 8, cp);
        if (cp > 0x10FFFF) fail_at(line_, "illegal Unicode character in string");
        utf8_append(out, cp);
        return i + 10;
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      size_t k = i + 1;
      while (k < i + 4 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7') {
        cp = cp * 8 + (src_[k] - '0');
        ++k;
      }
      utf8_append(out, cp);
      return k;
    }
    out.push_back('\\');  // unknown escapes stay as written
    return i + 1;
  }

  void lex_operator(std::string& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Token{TokenType::Operator, op, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    static const std::string kOne = "+-/*%~[](){}<>=.:|,;";
    if (kOne.find(c) == std::string::npos)
      fail_at(line_, std::string("unexpected char '") + c + "' in tag");
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
      if (balance.size() > 1000) fail_at(line_, "brackets nested too deeply");
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail_at(line_, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        fail_at(line_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    tokens_.push_back(Token{TokenType::Operator, std::string(1, c), line_});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace herd::chat
