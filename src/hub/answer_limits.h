// How much of a pod's answer the hub reads, and for how long (docs/network.md, "Pods'
// answers"). A pod is anyone who registered: the hub reads what it answers within these
// bounds (PodClients), and an answer past its byte cap is a fault of the pod.
//
//   a completion     1 MiB + per token of the answer's most (max_tokens, else the model's
//                    context, else kMaxAnswerTokens): 2 KiB and the model's name (a streamed
//                    token is one event of ~300 bytes naming the model; a token's text is at
//                    most a few hundred bytes, escaped), 8 KiB more when logprobs are asked
//                    (20 alternatives, each with its text, bytes and logprob); at most
//                    kMaxAnswerBytes. Within 120 s + 0.05 s a prompt token + 0.5 s an answer
//                    token (a pod at 2 tok/s finishes), at most an hour.
//   /api/verify      1 MiB + 4 KiB per id checked (a checker's per-token scores and its
//                    detokenization), within 300 s.
//   /health, /api/load   64 KiB, within 10 s.
#pragma once

#include <chrono>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "hub/pod_clients.h"

namespace herd::hub {

inline constexpr int64_t kMaxAnswerTokens = int64_t{1} << 20;
inline constexpr size_t kMaxAnswerBytes = size_t{256} << 20;
inline constexpr AnswerLimits kSmallAnswer{size_t{64} << 10, std::chrono::seconds(10)};

// The most tokens an answer may have: the client's max_tokens (`max_tokens_given`, -1 when
// none) and the model's context (`n_ctx`, 0 when unknown), at most kMaxAnswerTokens.
int64_t answer_token_bound(int64_t max_tokens_given, int64_t n_ctx);

// A completion's answer, for a client's request `body` (OpenAI's) of about `prompt_tokens`.
AnswerLimits completion_answer_limits(const nlohmann::json& body, int64_t max_tokens_given,
                                      int64_t prompt_tokens, int64_t n_ctx);

// A checker's answer to /api/verify for `ids` token ids.
AnswerLimits verify_answer_limits(size_t ids);

}  // namespace herd::hub
