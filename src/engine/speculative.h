// Speculative decoding's two pure parts (issue 31): where draft tokens come from without a
// draft model (prompt lookup), and how the target's logits for a sequence's draft decide
// which of them to keep. A draft of k tokens costs the target one batched forward of k + 1
// rows; decode is memory-bound, so that costs about one row's time, and each accepted token
// is a token the target did not run alone for.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace herd::engine {

// How a request drafts: up to `lookup` tokens per step from prompt lookup (below), with
// n-grams of ngram_max down to ngram_min tokens; up to `draft` tokens per step from a draft
// model (a smaller model of the same vocabulary that the server loaded); or up to `mtp`
// tokens per step from the model's own MTP head (mtp_head.h, where the runner loaded it).
// Where several are asked and available, the MTP head wins (it is part of the model: no
// second model to run), then the draft model, then prompt lookup.
struct SpeculativeParams {
  int lookup = 0;  // draft tokens per step at most; 0: off
  int ngram_min = 1, ngram_max = 3;
  int draft = 0;  // draft-model tokens per step at most; 0: off
  int mtp = 0;    // MTP-head tokens per step at most; 0: off
};

// Prompt lookup: the longest n-gram (n_max down to n_min tokens) that ends `tokens` and
// occurred earlier in them; the k tokens that followed its latest earlier occurrence, read
// on periodically past the end (none when there is none). Answers that quote their prompt, code
// edits, and repetitive text draft well this way, with no draft model.
std::vector<int32_t> lookup_draft(std::span<const int32_t> tokens, int n_min, int n_max, int k);
// The same into `out` (its memory reused: no allocation once warm).
void lookup_draft(std::span<const int32_t> tokens, int n_min, int n_max, int k,
                  std::vector<int32_t>& out);

struct DraftVerdict {
  int accepted = 0;   // draft tokens kept, a prefix of the draft
  int32_t next = -1;  // the token after them: the target's own at the first refusal, or
                      // after the whole draft, the bonus token from its last row
};

// Checks `draft` against the target's logits for the sequence: rows [k + 1][n_vocab], row i
// the target's next-token logits after the draft's first i tokens. With the sampler greedy,
// a draft token is kept while it is the target's choice: the output is token for token
// what decoding without a draft gives. Sampled, the standard rule (Leviathan et al. 2023,
// Chen et al. 2023) keeps the output distributed as the target's: token i is kept with
// probability min(1, p_i / q_i), else the next token is drawn from max(0, p - q) normalized;
// p is the target's distribution after the sampler's chain (sampler.h), q the draft's:
// draft_probs[i], or, when empty (a lookup draft, a greedy draft model), all on the draft
// token. Every kept token and `next` are accepted into the sampler (its penalties).
DraftVerdict check_draft(Sampler& sampler, std::span<const int32_t> draft,
                         std::span<const float> rows, int64_t n_vocab,
                         std::span<const TokenProbs> draft_probs = {});

// What check_draft works in, kept by a caller that checks drafts every step (no allocation
// once warm).
struct DraftScratch {
  TokenProbs target, rest;
  std::vector<float> q_row;  // [n_vocab] the draft's distribution, dense
};
DraftVerdict check_draft(Sampler& sampler, std::span<const int32_t> draft,
                         std::span<const float> rows, int64_t n_vocab,
                         std::span<const TokenProbs> draft_probs, DraftScratch& scratch);

}  // namespace herd::engine
