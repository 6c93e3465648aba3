// SentencePiece BPE ("llama" vocabularies): the text, with spaces spelled '▁', starts as
// one symbol per character; the adjacent pair whose concatenation is the highest-scoring
// token is merged, again and again, until no pair forms a token. A final symbol that is
// not a token is spelled with byte tokens "<0xNN>" (byte fallback), or <unk> without them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace herd::tokenizer {

// Per-call state; reuse one session for many fragments to keep its buffers.
class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of `text` to out. `space_prefix`: put a '▁' in front first (the
  // leading-space convention of SentencePiece's add_dummy_prefix).
  void encode(std::string_view text, bool space_prefix, std::vector<int32_t>& out);

 private:
  struct Symbol {
    uint32_t start = 0;  // byte range in escaped_
    uint32_t length = 0;
    int32_t prev = -1;
    int32_t next = -1;
  };
  struct Bigram {
    float score = 0;
    int32_t left = 0;
    int32_t right = 0;
    uint32_t length = 0;  // of the merged text, to detect stale entries
  };
  void try_add_bigram(int32_t left, int32_t right);
  void emit(const Symbol& symbol, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  std::string escaped_;
  std::vector<Symbol> symbols_;
  std::vector<Bigram> queue_;  // a binary heap (std::push_heap / pop_heap)
};

}  // namespace herd::tokenizer
