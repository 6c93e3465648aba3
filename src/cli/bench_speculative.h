// herd bench --lookup K | --draft M [--draft-max K] | --mtp K: what speculative decoding buys on
// this model and machine, in one run. (1) The cost of verifying: a forward of the pending token and
// K drafted tokens against a forward of one token at the same position (decode reads every weight
// once whatever the rows, so this is near 1x for small K where decode is memory-bound). (2) A
// greedy generation through the scheduler with and without drafts (prompt lookup, or the
// draft model's, or the model's MTP head's), alternated
// rep by rep: decode speed of each, the share of drafted tokens the target kept, and tokens
// per target forward.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runner.h"

namespace herd::cli {

struct SpeculativeBench {
  const char* kind = "lookup";  // or "draft", "mtp"
  int k = 0;
  double verify_ms = 0, one_ms = 0;           // a forward of k + 1 rows, of 1 row (medians)
  double plain_tok_s = 0, drafted_tok_s = 0;  // decode, medians
  double acceptance = 0;                      // kept / drafted
  double tokens_per_forward = 0;              // generated / target forwards (drafted run)
  int64_t drafted = 0, kept = 0, generated = 0;
  bool same_tokens = true;  // the drafted run's tokens are the plain run's (greedy)
  nlohmann::ordered_json json() const;
  void print() const;
};

// draft: the draft model (k of its tokens per step), or null for prompt lookup (k tokens).
// REQUIRES: prompt fits the context with n_gen + k more positions; slot 0 free.
// mtp: the model's MTP head drafts instead (runner.mtp_layers() > 0; draft null).
SpeculativeBench bench_speculative(engine::ModelRunner& runner, engine::ModelRunner* draft,
                                   const std::vector<int32_t>& prompt, int64_t n_gen, int k,
                                   int reps, bool mtp = false);

}  // namespace herd::cli
