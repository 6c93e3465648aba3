// TokenFilter: a per-step restriction on which tokens may come next, given to the sampler
// (structured outputs keep a reply inside a grammar this way). The sampler first draws from
// the model's own distribution and asks about that one token; only when it is refused does
// it ask for the whole allowed set, mask the rest and draw again. So a filter answers the
// cheap question most steps and the expensive one rarely.
#pragma once

#include <cstdint>
#include <span>

namespace herd::engine {

class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  // Whether `token` may come next.
  virtual bool allows(int32_t token) = 0;
  // allowed[t] = 1 when token t may come next, else 0. allowed: [n_vocab].
  virtual void allowed_tokens(std::span<uint8_t> allowed) = 0;
};

}  // namespace herd::engine
