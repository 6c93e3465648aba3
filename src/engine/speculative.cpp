#include "engine/speculative.h"

#include <algorithm>

#include "util/error.h"

namespace herd::engine {

std::vector<int32_t> lookup_draft(std::span<const int32_t> tokens, int n_min, int n_max, int k) {
  std::vector<int32_t> out;
  lookup_draft(tokens, n_min, n_max, k, out);
  return out;
}

void lookup_draft(std::span<const int32_t> tokens, int n_min, int n_max, int k,
                  std::vector<int32_t>& out) {
  out.clear();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (k <= 0 || n_min < 1) return;
  for (int64_t len = std::min<int64_t>(n_max, n - 1); len >= n_min; --len) {
    const std::span<const int32_t> tail = tokens.subspan(static_cast<size_t>(n - len));
    // The latest earlier occurrence: start at the last position where it fits before the tail.
    for (int64_t at = n - len - 1; at >= 0; --at) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + at)) continue;
      // What followed it; where that runs into the end of the tokens, the text repeats
      // with the period the match shows (n - from), so the draft goes on copying itself,
      // as LZ77 copies an overlapping match: "a b a b" drafts "a b a b ...", not one "a".
      const int64_t from = at + len;
      out.reserve(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) {
        const int64_t source = from + i;
        out.push_back(source < n ? tokens[static_cast<size_t>(source)]
                                 : out[static_cast<size_t>(source - n)]);
      }
      return;
    }
  }
}

namespace {

float probability_of(const TokenProbs& probs, int32_t token) {
  for (const TokenProb& t : probs) {
    if (t.id == token) return t.p;
  }
  return 0.0f;
}

// The draft's distribution as a dense row, for looking up every target token's q.
void spread(const TokenProbs& probs, std::vector<float>& dense) {
  for (const TokenProb& t : probs) {
    if (t.id >= 0 && static_cast<size_t>(t.id) < dense.size()) {
      dense[static_cast<size_t>(t.id)] = t.p;
    }
  }
}

}  // namespace

DraftVerdict check_draft(Sampler& sampler, std::span<const int32_t> draft,
                         std::span<const float> rows, int64_t n_vocab,
                         std::span<const TokenProbs> draft_probs) {
  DraftScratch scratch;
  return check_draft(sampler, draft, rows, n_vocab, draft_probs, scratch);
}

DraftVerdict check_draft(Sampler& sampler, std::span<const int32_t> draft,
                         std::span<const float> rows, int64_t n_vocab,
                         std::span<const TokenProbs> draft_probs, DraftScratch& scratch) {
  const size_t k = draft.size();
  HERD_CHECK(rows.size() == (k + 1) * static_cast<size_t>(n_vocab));
  HERD_CHECK(draft_probs.empty() || draft_probs.size() == k);
  const auto row = [&](size_t i) {
    return rows.subspan(i * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab));
  };
  DraftVerdict verdict;
  TokenProbs& target = scratch.target;
  TokenProbs& rest = scratch.rest;
  std::vector<float>& q_row = scratch.q_row;
  for (size_t i = 0; i < k; ++i) {
    const int32_t token = draft[i];
    sampler.distribution(row(i), target);
    const float p = probability_of(target, token);
    const float q = draft_probs.empty() ? 1.0f : probability_of(draft_probs[i], token);
    // Greedy: target is one token at 1, so p is 1 (kept) or 0 (refused), whatever q.
    const bool keep = p > 0.0f && (p >= q || sampler.uniform() * static_cast<double>(q) < p);
    if (keep) {
      sampler.accept(token);
      ++verdict.accepted;
      continue;
    }
    // Refused: the next token from max(0, p - q), the target's mass the draft did not cover.
    rest.clear();
    if (!draft_probs.empty()) {
      q_row.assign(static_cast<size_t>(n_vocab), 0.0f);
      spread(draft_probs[i], q_row);
    }
    for (const TokenProb& t : target) {
      const float d =
          draft_probs.empty() ? (t.id == token ? 1.0f : 0.0f) : q_row[static_cast<size_t>(t.id)];
      if (t.p > d) rest.push_back({t.id, t.p - d});
    }
    verdict.next = rest.empty() ? target.front().id : sampler.draw(rest);
    sampler.accept(verdict.next);
    return verdict;
  }
  verdict.next = sampler.sample(row(k));
  sampler.accept(verdict.next);
  return verdict;
}

}  // namespace herd::engine
