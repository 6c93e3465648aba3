#include "hub/billing.h"

#include <algorithm>

namespace herd::hub {

Billed bill(const AnswerFacts& facts, int64_t request_bytes, int64_t max_tokens, int64_t n_ctx) {
  Billed b;
  // The ids kept (a reader keeps one past the request's most) and all those given.
  const auto kept = static_cast<int64_t>(facts.token_ids.size());
  const int64_t ids = std::max(kept, facts.ids_given);
  const int64_t said = facts.completion_tokens.value_or(0);
  int64_t most = std::min(kept, max_tokens);
  if (n_ctx > 0) most = std::min(most, n_ctx);
  b.completion_tokens = std::clamp<int64_t>(said, 0, std::max<int64_t>(most, 0));
  int64_t prompt_most = std::max<int64_t>(request_bytes, 0) + kTemplateTokens;
  if (n_ctx > 0) prompt_most = std::min(prompt_most, n_ctx);
  b.prompt_tokens = std::clamp<int64_t>(facts.prompt_tokens.value_or(0), 0, prompt_most);

  const std::string counts = std::to_string(ids) + " ids";
  if (ids == 0 && said > 0) {
    b.fault = "the answer counts " + std::to_string(said) +
              " completion tokens and gives no completion_token_ids";
  } else if (said != ids) {
    b.fault =
        "the answer counts " + std::to_string(said) + " completion tokens and gives " + counts;
  } else if (ids > max_tokens) {
    b.fault = counts + " for a request of max_tokens " + std::to_string(max_tokens);
  } else if (n_ctx > 0 && ids > n_ctx) {
    b.fault = counts + " beyond the model's context of " + std::to_string(n_ctx);
  }
  return b;
}

}  // namespace herd::hub
