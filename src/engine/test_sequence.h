// Test support: runs the token ids of one sequence through a runner as positions [0, n) of a
// slot, n_batch tokens per forward pass, bypassing the scheduler: the tests that check a
// runner's logits against the reference, or one runner against another, use it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/runner.h"

namespace herd::engine {

// Returns the logits of every position, [n][n_vocab], when all_logits, else those of the last
// position only, [n_vocab]. A runner that loses its states (StatesLost: a pod formed again)
// has the sequence run again from position 0, a few times at most.
inline std::vector<float> forward_sequence(ModelRunner& model, std::span<const int32_t> ids,
                                           int32_t seq, int64_t n_batch, bool all_logits) {
  n_batch = std::max<int64_t>(1, n_batch);
  std::vector<float> all, logits;
  Batch batch;
  for (int lost = 0;; ++lost) {
    all.clear();
    try {
      for (size_t begin = 0; begin < ids.size(); begin += static_cast<size_t>(n_batch)) {
        const size_t end = std::min(ids.size(), begin + static_cast<size_t>(n_batch));
        batch.clear();
        for (size_t i = begin; i < end; ++i) {
          batch.add(ids[i], seq, static_cast<int32_t>(i), all_logits || i + 1 == ids.size());
        }
        model.forward(batch, logits);
        if (all_logits) all.insert(all.end(), logits.begin(), logits.end());
      }
      return all_logits ? all : logits;
    } catch (const StatesLost&) {
      if (lost == 3) throw;
    }
  }
}

}  // namespace herd::engine
