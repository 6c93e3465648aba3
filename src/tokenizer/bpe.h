// Byte-level BPE ("gpt2" vocabularies): the pre-tokenizer cuts text into words; each
// word starts as one symbol per byte (the token spelling that byte); the adjacent pair
// with the lowest merge rank is merged, again and again, until no pair has a merge.
// With ignore_merges (Llama 3) a word that is itself a token is taken whole first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace herd::tokenizer {

// Per-call state; reuse one session for many fragments to keep its buffers.
class BpeSession {
 public:
  BpeSession(const Vocab& vocab, const PreTokenizer& pre_tokenizer)
      : vocab_(vocab), pre_tokenizer_(pre_tokenizer) {}

  // Appends the tokens of `text` to out.
  void encode(std::string_view text, std::vector<int32_t>& out);

 private:
  struct Symbol {
    int32_t id = -1;  // token, or -1 for a byte the vocabulary cannot spell
    int32_t prev = -1;
    int32_t next = -1;
  };
  struct Bigram {
    int32_t rank = 0;
    int32_t left = 0;
    int32_t right = 0;
    int32_t left_id = 0;  // the pair as queued, to detect stale entries
    int32_t right_id = 0;
    int32_t result = 0;  // the token the merge makes
  };
  void encode_word(std::string_view word, std::vector<int32_t>& out);
  void try_add_bigram(int32_t left, int32_t right);

  const Vocab& vocab_;
  const PreTokenizer& pre_tokenizer_;
  std::vector<std::string_view> words_;
  std::vector<std::string_view> scratch_;
  std::string spelled_;
  std::vector<Symbol> symbols_;
  std::vector<Bigram> queue_;  // a binary heap (std::push_heap / pop_heap)
};

}  // namespace herd::tokenizer
