// Batch: the tokens of one forward pass. Tokens of several sequences share the pass
// through the weights (that is what makes serving many users cheap); each token carries
// its own sequence slot and position, and says whether its logits are wanted.
#pragma once

#include <cstdint>
#include <vector>

namespace herd::engine {

struct Batch {
  std::vector<int32_t> tokens;       // [n] token ids (ignored by shards without the embedding)
  std::vector<int32_t> seq;          // [n] KV-cache slot of the token's sequence
  std::vector<int32_t> pos;          // [n] position in its sequence
  std::vector<uint8_t> want_logits;  // [n] 1 when the caller needs this token's logits

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  void clear() {
    tokens.clear();
    seq.clear();
    pos.clear();
    want_logits.clear();
  }
  void add(int32_t token, int32_t seq_id, int32_t position, bool logits) {
    tokens.push_back(token);
    seq.push_back(seq_id);
    pos.push_back(position);
    want_logits.push_back(logits ? 1 : 0);
  }
  int64_t n_logits() const {
    int64_t n = 0;
    for (uint8_t w : want_logits) n += w;
    return n;
  }
};

}  // namespace herd::engine
