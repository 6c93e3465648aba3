// What a pod's answer may be charged (issue 28): the hub bills the tokens the pod gave ids
// for, never more than the request allowed, and reads the answer for what no honest pod
// sends. Pure: the hub calls bill() on every whole answer before the books.
//
//   completion tokens  at most the ids the pod gave (a check replays them), the request's
//                      max_tokens and the model's context (n_ctx, from the pod's
//                      registration; 0: unknown)
//   prompt tokens      at most the request's bytes (and a template's few) and the context
//
// A fault is what an honest herd serve never answers when the hub asks for ids: usage that
// counts other than the ids (herd serve counts exactly the tokens it generated, and gives
// each one's id), ids missing from an answer with completion tokens, more ids than
// max_tokens or the context. A fault fails the pod's check without asking a checker: its
// reputation and its pending credits go, as for any failed check.
#pragma once

#include <cstdint>
#include <string>

#include "hub/answer_reader.h"

namespace herd::hub {

struct Billed {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string fault;  // "" when none
};

// A template's tokens beyond the request's bytes: the prompt's most is bytes + this.
inline constexpr int64_t kTemplateTokens = 256;

Billed bill(const AnswerFacts& facts, int64_t request_bytes, int64_t max_tokens, int64_t n_ctx);

}  // namespace herd::hub
