// TokenTrie: a vocabulary's token texts as a byte trie, built once per tokenizer, so that a
// filter can find every token a character-level automaton accepts by walking shared
// prefixes once (the tokens starting with '"' are all refused by one step) instead of
// running the automaton over each of n_vocab texts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace herd::engine {

class TokenTrie {
 public:
  // texts[t]: the bytes token t adds to the text (empty: the token is never offered).
  explicit TokenTrie(const std::vector<std::string>& texts);
  TokenTrie(TokenTrie&&) noexcept = default;
  TokenTrie& operator=(TokenTrie&&) noexcept = default;
  TokenTrie(const TokenTrie&) = delete;
  TokenTrie& operator=(const TokenTrie&) = delete;

  // Sets allowed[t] = 1 for every token whose whole text `start` accepts, byte by byte.
  // State: copyable, with `bool push(unsigned char)` that returns false once the bytes so
  // far cannot continue (the state is then not used again). When skip_leading_space, a
  // text's first byte is dropped if it is a space (SentencePiece's first piece, which the
  // decoder shows without its space). allowed: [n_vocab]; entries not set are left alone.
  template <class State>
  void walk(const State& start, bool skip_leading_space, std::span<uint8_t> allowed,
            std::vector<State>& scratch) const;

  size_t n_nodes() const { return nodes_.size(); }

 private:
  // The nodes are stored depth first: a node's subtree is [node, node + size).
  struct Node {
    uint32_t size = 1;         // nodes in the subtree, this one included
    uint32_t token_begin = 0;  // tokens_[token_begin, token_end) end exactly here
    uint32_t token_end = 0;
    uint8_t byte = 0;  // the byte on the edge into this node
    uint8_t depth = 0;
  };
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty text)
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;
};

template <class State>
void TokenTrie::walk(const State& start, bool skip_leading_space, std::span<uint8_t> allowed,
                     std::vector<State>& scratch) const {
  // scratch[d]: the state after the first d bytes of the current path.
  if (scratch.size() < max_depth_ + 1) scratch.resize(max_depth_ + 1, start);
  scratch[0] = start;
  auto mark = [&](const Node& n) {
    for (uint32_t i = n.token_begin; i < n.token_end; ++i) {
      allowed[static_cast<size_t>(tokens_[i])] = 1;
    }
  };
  size_t i = 1;
  while (i < nodes_.size()) {
    const Node& n = nodes_[i];
    State& state = scratch[n.depth];
    state = scratch[n.depth - 1];
    const bool skipped = skip_leading_space && n.depth == 1 && n.byte == ' ';
    if (!skipped && !state.push(n.byte)) {
      i += n.size;  // nothing below continues either
      continue;
    }
    if (!skipped) mark(n);  // a text that was only the skipped space adds nothing
    ++i;
  }
}

}  // namespace herd::engine
