#include "hub/answer_limits.h"

#include <algorithm>
#include <string>

namespace herd::hub {
namespace {

using json = nlohmann::json;

constexpr size_t kBaseBytes = size_t{1} << 20;
constexpr size_t kTokenBytes = size_t{2} << 10;
constexpr size_t kLogprobTokenBytes = size_t{8} << 10;

// Whether the request asks for logprobs: chat's "logprobs": true, a completion's count.
bool wants_logprobs(const json& body) {
  const auto it = body.find("logprobs");
  if (it == body.end()) return false;
  if (it->is_boolean()) return it->get<bool>();
  return it->is_number() && it->get<double>() > 0;
}

}  // namespace

int64_t answer_token_bound(int64_t max_tokens_given, int64_t n_ctx) {
  int64_t most = max_tokens_given >= 0 ? max_tokens_given : kMaxAnswerTokens;
  if (n_ctx > 0) most = std::min(most, n_ctx);
  return std::clamp<int64_t>(most, 1, kMaxAnswerTokens);
}

AnswerLimits completion_answer_limits(const json& body, int64_t max_tokens_given,
                                      int64_t prompt_tokens, int64_t n_ctx) {
  const auto tokens = static_cast<size_t>(answer_token_bound(max_tokens_given, n_ctx));
  size_t model = 0;
  if (body.is_object() && body.contains("model") && body["model"].is_string()) {
    model = body["model"].get_ref<const std::string&>().size();
  }
  const bool logprobs = body.is_object() && wants_logprobs(body);
  const size_t per_token = kTokenBytes + model + (logprobs ? kLogprobTokenBytes : 0);
  // Overflow-safe: tokens <= 2^20 and per_token is bounded by the request's size.
  const size_t most = kBaseBytes + std::min(tokens, kMaxAnswerBytes / per_token) * per_token;
  AnswerLimits limits;
  limits.max_bytes = std::min(most, kMaxAnswerBytes);
  const double seconds =
      120 + 0.05 * static_cast<double>(std::max<int64_t>(prompt_tokens, 0)) + 0.5 * tokens;
  limits.deadline = std::chrono::seconds(static_cast<int64_t>(std::min(seconds, 3600.0)));
  return limits;
}

AnswerLimits verify_answer_limits(size_t ids) {
  AnswerLimits limits;
  limits.max_bytes =
      kBaseBytes + std::min(ids, kMaxAnswerBytes / (size_t{4} << 10)) * (size_t{4} << 10);
  limits.deadline = std::chrono::seconds(300);
  return limits;
}

}  // namespace herd::hub
