// Finds the texts of special tokens (control, unknown and user-defined tokens) in input
// text, so that "<|im_start|>" becomes one token instead of being spelled out.
//
// Which tokens are looked for follows llama.cpp (and Hugging Face's added tokens):
// user-defined tokens are always matched; control and unknown tokens only when the caller
// asks to parse special tokens. Matching is leftmost-longest: the earliest position where
// some token matches wins, and there the longest token.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace herd::tokenizer {

struct SpecialTokenMatch {
  size_t start = 0;
  size_t length = 0;
  int32_t id = 0;
};

class SpecialTokenMatcher {
 public:
  // Adds a token. `always` = matched even when special tokens are not parsed
  // (user-defined tokens). Empty texts are ignored. A text added twice keeps the first id.
  void add(std::string_view text, int32_t id, bool always);
  bool empty() const { return n_tokens_ == 0; }

  // The first match at or after `from`, or nullopt.
  std::optional<SpecialTokenMatch> find(std::string_view text, size_t from,
                                        bool parse_special) const;

 private:
  // A byte trie. Node 0 is the root; edges are keyed (node << 8 | byte).
  struct Node {
    int32_t id = -1;  // token ending here, or -1
    bool always = false;
  };
  uint32_t child(uint32_t node, uint8_t byte) const;

  std::vector<Node> nodes_{Node{}};
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::array<bool, 256> first_byte_{};  // quick rejection of positions
  std::array<bool, 256> first_byte_always_{};
  size_t n_tokens_ = 0;
};

}  // namespace herd::tokenizer
