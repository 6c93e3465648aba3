// Sampler: picks the next token from logits. The chain runs in llama.cpp's order:
// penalties (repetition / presence / frequency over the recent tokens), top-k, top-p,
// min-p, temperature, then a draw from the seeded generator. Temperature <= 0 is greedy.
// A TokenFilter, when given, restricts the draw to the tokens it allows (see token_filter.h).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/token_filter.h"

namespace herd::engine {

// How plausible a token is as a sampler's draw (DrawCheck below): what a hub's checker
// reports for each token another machine served (issue 19, docs/network.md).
struct DrawCheck {
  double probability = 0;  // at the temperature, over the whole vocabulary; 1/0 when greedy
  float gap = 0;           // the best logit minus the token's (after penalties); >= 0
  // What an honest draw's log-probability would be: its mean (minus the entropy) and its
  // variance, over the same distribution (0 when greedy). Over many tokens the sum of
  // log p + entropy of honest draws stays near zero; another model's tokens fall far below.
  double entropy = 0;
  double variance = 0;
};

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off; > 1 discourages tokens seen in the last penalty_last_n
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;
  uint64_t seed = 0xC0FFEE;
};

// A token and its probability: an entry of the distribution the sampler draws from.
struct TokenProb {
  int32_t id;
  float p;
};
using TokenProbs = std::vector<TokenProb>;

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);

  // Chooses a token from logits [n_vocab]. Does not remember it: call accept() with the
  // token that was actually used (the prompt's tokens too, for the penalties).
  // With a filter, the token is one it allows; -1 when it allows none.
  int32_t sample(std::span<const float> logits, TokenFilter* filter = nullptr);
  void accept(int32_t token);
  void reset();
  // How plausible `token` is as this sampler's draw from `logits`, with the penalties of
  // the tokens accepted so far. The probability is the temperature's softmax over the whole
  // vocabulary, not cut by top-k/top-p/min-p: a checker on other kernels must not refuse an
  // honest token that sat at a cut. Greedy (temperature <= 0): 1 for the best token, else
  // 0; the gap says how near it was.
  DrawCheck check(std::span<const float> logits, int32_t token);

  const SamplerParams& params() const { return params_; }

  // The distribution sample() draws from (penalties, top-k, top-p, min-p, temperature), the
  // tokens it may draw with probabilities summing to 1, most likely first; greedy: the one
  // token it would choose, at 1. For speculative decoding (speculative.h), which compares a
  // draft's distribution with the target's. Reuses `out`'s memory.
  void distribution(std::span<const float> logits, TokenProbs& out);
  // A draw from `probs` (whose probabilities need not sum to 1) with this sampler's generator.
  int32_t draw(const TokenProbs& probs);
  // A uniform draw in [0, 1) from this sampler's generator.
  double uniform();

 private:
  int32_t sample_unfiltered(std::span<const float> logits);
  // candidates_[0, n) and probs_[0, n): the tokens the chain keeps, most likely first, with
  // their unnormalized probabilities at the temperature; returns n. REQUIRES: temperature > 0.
  size_t chain(std::span<const float> logits);
  bool penalizing() const;
  // candidates_ = logits with the penalties of the recent tokens applied.
  void penalized_candidates(std::span<const float> logits);

  struct Candidate {
    int32_t id;
    float logit;
  };
  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> recent_;  // the last penalty_last_n accepted tokens
  std::vector<Candidate> candidates_;
  std::vector<float> probs_;      // chain()'s, kept to spare an allocation per token
  std::vector<uint8_t> allowed_;  // [n_vocab], filtered draws only
  std::vector<float> masked_;     // [n_vocab] logits with refused tokens at -inf
};

// argmax with the lowest id winning ties.
int32_t greedy(std::span<const float> logits);

}  // namespace herd::engine
