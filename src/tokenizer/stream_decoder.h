// StreamDecoder: turns ids into text one id at a time, as a model generates them, and
// only ever hands out complete UTF-8 characters. A token that ends inside a character
// (byte tokens of an emoji, byte-level BPE pieces of a CJK character) is held until the
// character completes; bytes that can never form a character become U+FFFD. The
// concatenation of everything push() and flush() return equals Tokenizer::decode of the
// same ids whenever that decode is valid UTF-8.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace herd::tokenizer {

class StreamDecoder {
 public:
  // REQUIRES: tokenizer outlives the decoder. render_special: show control tokens' text.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}

  // The text that is complete once `id` is added (possibly empty).
  // Throws herd::Error for an id outside the vocabulary.
  std::string push(int32_t id);
  // Whatever is still held, with an unfinished character as U+FFFD; starts over.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  bool first_piece_ = true;
  std::string pending_;  // bytes of an unfinished character, at most 3
};

}  // namespace herd::tokenizer
