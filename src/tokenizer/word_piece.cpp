#include "tokenizer/word_piece.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace herd::tokenizer {

namespace {

// BERT's limit: longer words are [UNK] without trying (bounds the quadratic search).
constexpr size_t kMaxWordChars = 100;

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581 '▁', GGUF's word start

void check_icu(UErrorCode status, const char* what) {
  if (U_FAILURE(status)) {
    throw Error("tokenizer", std::string("ICU ") + what + " failed: " + u_errorName(status));
  }
}

// BERT's "control": every C* category except the three whitespace controls.
bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const int8_t t = u_charType(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED ||
         t == U_PRIVATE_USE_CHAR || t == U_SURROGATE;
}

bool is_white_space(UChar32 c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c);
}

// The CJK Unified Ideographs blocks, as BERT lists them (Hangul and kana excluded).
bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// All printable ASCII that is not alphanumeric counts ("$", "+", "^" are symbols in
// Unicode but punctuation to BERT), plus the Unicode punctuation categories.
bool is_punctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  const int8_t t = u_charType(c);
  return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
         t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
         t == U_OTHER_PUNCTUATION;
}

void append_utf16(std::u16string& out, UChar32 c) {
  if (c < 0x10000) {
    out += static_cast<char16_t>(c);
  } else {
    out += static_cast<char16_t>(U16_LEAD(c));
    out += static_cast<char16_t>(U16_TRAIL(c));
  }
}

// The clean-up and CJK spacing of step 1, into UTF-16 for ICU.
std::u16string clean_text(std::string_view text) {
  std::u16string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char ch = decode_utf8(text, pos);
    pos += ch.length;
    const auto c = static_cast<UChar32>(ch.cp);
    if (!ch.valid || c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_white_space(c)) {
      out += u' ';
    } else if (is_cjk(c)) {
      out += u' ';
      append_utf16(out, c);
      out += u' ';
    } else {
      append_utf16(out, c);
    }
  }
  return out;
}

std::u16string to_nfd(const std::u16string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  check_icu(status, "NFD instance");
  const auto* src = reinterpret_cast<const UChar*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  int32_t needed = unorm2_normalize(nfd, src, length, nullptr, 0, &status);
  if (status != U_BUFFER_OVERFLOW_ERROR) check_icu(status, "NFD");
  status = U_ZERO_ERROR;
  std::u16string out(static_cast<size_t>(needed), u'\0');
  unorm2_normalize(nfd, src, length, reinterpret_cast<UChar*>(out.data()), needed, &status);
  check_icu(status, "NFD");
  return out;
}

std::u16string drop_non_spacing_marks(const std::u16string& text) {
  std::u16string out;
  out.reserve(text.size());
  const auto length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U16_NEXT(text.data(), i, length, c);
    if (u_charType(c) != U_NON_SPACING_MARK) append_utf16(out, c);
  }
  return out;
}

// Full Unicode lower-casing (root locale), as Rust's char::to_lowercase.
std::u16string to_lower(const std::u16string& text) {
  if (text.empty()) return text;
  UErrorCode status = U_ZERO_ERROR;
  const auto* src = reinterpret_cast<const UChar*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  int32_t needed = u_strToLower(nullptr, 0, src, length, "", &status);
  if (status != U_BUFFER_OVERFLOW_ERROR) check_icu(status, "lower-casing");
  status = U_ZERO_ERROR;
  std::u16string out(static_cast<size_t>(needed), u'\0');
  u_strToLower(reinterpret_cast<UChar*>(out.data()), needed, src, length, "", &status);
  check_icu(status, "lower-casing");
  return out;
}

}  // namespace

std::vector<std::string> bert_pre_tokenize(std::string_view text) {
  const std::u16string normalized = to_lower(drop_non_spacing_marks(to_nfd(clean_text(text))));
  std::vector<std::string> words;
  std::string word;
  auto finish_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  const auto length = static_cast<int32_t>(normalized.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U16_NEXT(normalized.data(), i, length, c);
    if (is_white_space(c)) {
      finish_word();
    } else if (is_punctuation(c)) {
      finish_word();
      append_utf8(word, static_cast<uint32_t>(c));
      finish_word();
    } else {
      append_utf8(word, static_cast<uint32_t>(c));
    }
  }
  finish_word();
  return words;
}

void WordPieceSession::encode_word(std::string_view word, std::vector<int32_t>& out) {
  size_t n_chars = 0;
  for (char c : word) n_chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  pieces_.clear();
  const bool marks_continuations = vocab_.word_piece_marks_continuations();
  bool covered = n_chars <= kMaxWordChars;
  for (size_t start = 0; covered && start < word.size();) {
    size_t end = word.size();
    std::optional<int32_t> found;
    while (end > start) {
      candidate_.clear();
      if (start == 0 && !marks_continuations) candidate_ += kWordStart;
      if (start > 0 && marks_continuations) candidate_ += "##";
      candidate_.append(word.substr(start, end - start));
      found = vocab_.find(candidate_);
      if (found) break;
      do --end;  // back to the previous character boundary (word is valid UTF-8)
      while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (!found) {
      covered = false;
    } else {
      pieces_.push_back(*found);
      start = end;
    }
  }
  if (covered) {
    out.insert(out.end(), pieces_.begin(), pieces_.end());
  } else if (vocab_.unk()) {
    out.push_back(*vocab_.unk());
  }
}

void WordPieceSession::encode(std::string_view text, std::vector<int32_t>& out) {
  for (const std::string& word : bert_pre_tokenize(text)) encode_word(word, out);
}

}  // namespace herd::tokenizer
