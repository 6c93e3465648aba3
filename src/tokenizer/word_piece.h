// WordPiece ("bert" vocabularies), as Hugging Face's BertTokenizer does it:
//   1. normalize: drop NUL, U+FFFD and control characters; whitespace becomes ' ';
//      CJK ideographs get spaces around them; NFD, then drop non-spacing marks (accent
//      stripping: "Führer" -> "Fuhrer"); lower-case.
//   2. split on whitespace, and around every punctuation character (ASCII punctuation
//      and Unicode P* categories).
//   3. each word: greedy longest match from the left; a word that cannot be covered, or
//      is longer than 100 characters, becomes [UNK]. Pieces are spelled as the vocabulary
//      does: GGUF's "▁word" + "piece", or Hugging Face's "word" + "##piece".
// Unicode data (normalization, categories, case) comes from ICU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace herd::tokenizer {

// Steps 1 and 2: the words of text, UTF-8. Throws herd::Error if ICU fails.
std::vector<std::string> bert_pre_tokenize(std::string_view text);

// Per-call state; reuse one session for many fragments to keep its buffers.
class WordPieceSession {
 public:
  explicit WordPieceSession(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of `text` to out.
  void encode(std::string_view text, std::vector<int32_t>& out);

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out);

  const Vocab& vocab_;
  std::string candidate_;
  std::vector<int32_t> pieces_;
};

}  // namespace herd::tokenizer
