#include "tokenizer/spm.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace herd::tokenizer {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 '▁'

// Heap order: the highest score on top; among equal scores the leftmost pair, so that
// "aaa" with the token "aa" becomes "aa" + "a", as SentencePiece does.
struct BigramLess {
  template <typename B>
  bool operator()(const B& a, const B& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void SpmSession::try_add_bigram(int32_t left, int32_t right) {
  if (left < 0 || right < 0) return;
  const Symbol& l = symbols_[left];
  const Symbol& r = symbols_[right];
  // Adjacent symbols are adjacent in escaped_, so their concatenation is a substring.
  const std::string_view merged(escaped_.data() + l.start, l.length + r.length);
  const auto id = vocab_.find(merged);
  if (!id) return;
  queue_.push_back(Bigram{vocab_.score(*id), left, right, l.length + r.length});
  std::push_heap(queue_.begin(), queue_.end(), BigramLess{});
}

void SpmSession::emit(const Symbol& symbol, std::vector<int32_t>& out) const {
  const std::string_view text(escaped_.data() + symbol.start, symbol.length);
  if (const auto id = vocab_.find(text)) {
    out.push_back(*id);
    return;
  }
  for (char c : text) {
    const int32_t byte_token = vocab_.byte_token(static_cast<uint8_t>(c));
    if (byte_token >= 0) {
      out.push_back(byte_token);
    } else if (vocab_.unk()) {
      // Without byte tokens a character outside the vocabulary is <unk>, once.
      out.push_back(*vocab_.unk());
      return;
    }
  }
}

void SpmSession::encode(std::string_view text, bool space_prefix, std::vector<int32_t>& out) {
  escaped_.clear();
  if (space_prefix) escaped_ += kSpaceMark;
  for (char c : text) {
    if (c == ' ') {
      escaped_ += kSpaceMark;
    } else {
      escaped_ += c;
    }
  }
  symbols_.clear();
  queue_.clear();
  // One symbol per character; an invalid byte is a character of its own.
  for (size_t pos = 0; pos < escaped_.size();) {
    const uint32_t length = decode_utf8(escaped_, pos).length;
    const auto index = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(Symbol{static_cast<uint32_t>(pos), length, index - 1, index + 1});
    pos += length;
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
    // Stale: one side was merged into something else since this pair was queued.
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length ||
        left.next != bigram.right) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols_[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols_[i].next) emit(symbols_[i], out);
}

}  // namespace herd::tokenizer
