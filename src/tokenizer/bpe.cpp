#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/byte_level.h"

namespace herd::tokenizer {

namespace {

// Heap order: the lowest rank on top; among equal ranks (the same pair in several
// places) the leftmost, as Hugging Face and llama.cpp merge.
struct BigramLess {
  template <typename B>
  bool operator()(const B& a, const B& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void BpeSession::try_add_bigram(int32_t left, int32_t right) {
  if (left < 0 || right < 0) return;
  const int32_t left_id = symbols_[left].id;
  const int32_t right_id = symbols_[right].id;
  if (left_id < 0 || right_id < 0) return;
  const BpeMerge* merge = vocab_.merge(left_id, right_id);
  if (merge == nullptr) return;
  queue_.push_back(Bigram{merge->rank, left, right, left_id, right_id, merge->result});
  std::push_heap(queue_.begin(), queue_.end(), BigramLess{});
}

void BpeSession::encode_word(std::string_view word, std::vector<int32_t>& out) {
  if (vocab_.ignore_merges()) {
    spelled_.clear();
    append_byte_level(spelled_, word);
    if (const auto id = vocab_.find(spelled_)) {
      out.push_back(*id);
      return;
    }
  }
  symbols_.clear();
  queue_.clear();
  for (size_t i = 0; i < word.size(); ++i) {
    const auto index = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(
        Symbol{vocab_.byte_token(static_cast<uint8_t>(word[i])), index - 1, index + 1});
  }
  if (symbols_.empty()) return;
  symbols_.back().next = -1;
  for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add_bigram(i - 1, i);

  while (!queue_.empty()) {
    std::pop_heap(queue_.begin(), queue_.end(), BigramLess{});
    const Bigram bigram = queue_.back();
    queue_.pop_back();
    Symbol& left = symbols_[bigram.left];
    Symbol& right = symbols_[bigram.right];
    // Stale: a side was merged since this pair was queued (merged-away symbols get -1).
    if (left.id != bigram.left_id || right.id != bigram.right_id || left.next != bigram.right) {
      continue;
    }
    left.id = bigram.result;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols_[right.next].prev = bigram.left;
    right.next = -1;
    right.prev = -1;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols_[i].next) {
    if (symbols_[i].id >= 0) {
      out.push_back(symbols_[i].id);
    } else if (vocab_.unk()) {
      out.push_back(*vocab_.unk());  // a byte the vocabulary cannot spell
    }
  }
}

void BpeSession::encode(std::string_view text, std::vector<int32_t>& out) {
  pre_tokenizer_.split(text, words_, scratch_);
  for (std::string_view word : words_) encode_word(word, out);
}

}  // namespace herd::tokenizer
