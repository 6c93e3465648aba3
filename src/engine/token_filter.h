// TokenFilter: a per-step restriction on which tokens may come next, given to the sampler
// (structured outputs keep a reply inside a grammar this way; the server's JSON grammars are
// one kind, server/json_token_filter.h). The sampler first draws from
// the model's own distribution and asks about that one token; only when it is refused does
// it ask for the whole allowed set, mask the rest and draw again. So a filter answers the
// cheap question most steps and the expensive one rarely.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace herd::engine {

class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  // Whether `token` may come next.
  virtual bool allows(int32_t token) = 0;
  // allowed[t] = 1 when token t may come next, else 0. allowed: [n_vocab].
  virtual void allowed_tokens(std::span<uint8_t> allowed) = 0;
  // Moves on past `token` (one allows() said yes to, or an end token). A filter of a fixed
  // set has nothing to move.
  virtual void accept(int32_t /*token*/) {}
  // The reply is whole: generation ends here, and an end token is allowed only here. A
  // filter of a fixed set is never whole (the reply ends as an unconstrained one would).
  virtual bool complete() const { return false; }
};

// What a request is held to: a fresh filter for each reply. start() runs on the scheduler's
// thread when the request is admitted, so it must be cheap (anything costly, such as tables
// over the vocabulary, is built before the request is submitted).
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::unique_ptr<TokenFilter> start() const = 0;
};

}  // namespace herd::engine
