// Generation of one sequence: chunked prefill of the prompt, then decode token by token,
// streaming text as it completes. Stops at an end-of-generation token, a stop string, the
// token budget, or a full context (reported, not silently wrapped).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runner.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace herd::engine {

struct GenerateOptions {
  int64_t n_predict = 128;  // < 0: until the context is full
  int64_t n_batch = 256;    // prompt tokens per forward pass (chunked prefill)
  int32_t seq = 0;          // KV-cache slot
  SamplerParams sampler;
  std::vector<std::string> stop_strings;
  bool stop_at_eog = true;
};

enum class StopReason { kEog, kStopString, kLength, kContextFull, kCallback };
std::string_view stop_reason_name(StopReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (the stop token not included)
  std::string text;             // the streamed text, up to any stop string
  StopReason stop = StopReason::kLength;
  int64_t n_prompt = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;  // from the first to the last generated token
};

// Runs ids as positions [0, n) of slot `seq`, n_batch tokens per forward pass (chunked
// prefill). Returns the logits of every position, [n][n_vocab], when all_logits, else
// those of the last position only, [n_vocab].
std::vector<float> forward_sequence(ModelRunner& model, std::span<const int32_t> ids, int32_t seq,
                                    int64_t n_batch, bool all_logits);

// on_text(piece) receives text as it completes; returning false stops generation.
using TextCallback = std::function<bool(std::string_view)>;

// REQUIRES: prompt is not empty and fits the context.
GenerateResult generate(ModelRunner& model, const tokenizer::Tokenizer& tokenizer,
                        const std::vector<int32_t>& prompt, const GenerateOptions& options,
                        const TextCallback& on_text);

// Holds back text that might be the start of a stop string, so that a stop string is
// never streamed. push() returns the text safe to emit; `stopped` turns true when a stop
// string has appeared (the text before it is returned, the rest dropped).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(std::string_view text);
  std::string flush();  // what is held, at the end of generation
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace herd::engine
