// What POST /api/verify (docs/network.md "Checks") says of served ids beyond their scores
// (issue 28): whether they can be scored at all, and the text an honest pod sends for them.
//
// Unscorable ids are a failed check, not an error: ids no honest pod of this model serves
// (outside the vocabulary, more than the request's max_tokens, beyond the context with the
// prompt). The hub cannot tell "the checker could not" from "the pod cheated" otherwise.
//
// The rendered text is what this server would have sent for the ids: decoded as the
// scheduler decodes them, cut at the request's first stop string, and for chat the message
// content its output parser gives (reasoning and tool calls taken out). The hub compares it
// with the text the pod sent (checks.h: text_mismatch). A check cannot see what the text
// does not carry: reasoning, tool calls' arguments and logprobs are not compared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scheduler.h"
#include "server/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace herd::server {

struct ServedIds {
  const std::vector<int32_t>* ids = nullptr;
  int64_t n_vocab = 0;
  int64_t max_tokens = -1;  // the request's (< 0: none)
  int64_t n_prompt = 0;     // this server's tokens of the request's prompt
  int64_t n_ctx = 0;        // what a sequence holds here
};

// "" when the ids can be scored; else why not (a sentence for the pod's record).
std::string unscorable(const ServedIds& served);

// REQUIRES: every id is in the vocabulary. `parser`: chat's output parser options; none for
// a plain completion.
std::string rendered_text(const tokenizer::Tokenizer& tokenizer, bool render_special,
                          const std::vector<std::string>& stops,
                          const std::optional<OutputParserOptions>& parser,
                          const std::vector<int32_t>& ids);

// The scores as the answer lists them: [{"token", "probability", "gap", "entropy",
// "variance"}, ...].
nlohmann::json scores_json(const std::vector<engine::TokenScore>& scores);

}  // namespace herd::server
