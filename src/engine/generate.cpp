#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "tokenizer/stream_decoder.h"
#include "util/error.h"

namespace herd::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEog:
      return "eog";
    case StopReason::kStopString:
      return "stop string";
    case StopReason::kLength:
      return "length";
    case StopReason::kContextFull:
      return "context full";
    case StopReason::kCallback:
      return "stopped";
  }
  return "?";
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    first = std::min(first, held_.find(s));
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest tail of held_ that is a prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    // A whole stop string would have been found above, so at most size - 1 of it is held.
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = stopped_ ? std::string() : held_;
  held_.clear();
  return out;
}

std::vector<float> forward_sequence(ModelRunner& model, std::span<const int32_t> ids, int32_t seq,
                                    int64_t n_batch, bool all_logits) {
  n_batch = std::max<int64_t>(1, n_batch);
  std::vector<float> all, logits;
  Batch batch;
  for (size_t begin = 0; begin < ids.size(); begin += static_cast<size_t>(n_batch)) {
    const size_t end = std::min(ids.size(), begin + static_cast<size_t>(n_batch));
    batch.clear();
    for (size_t i = begin; i < end; ++i) {
      batch.add(ids[i], seq, static_cast<int32_t>(i), all_logits || i + 1 == ids.size());
    }
    model.forward(batch, logits);
    if (all_logits) all.insert(all.end(), logits.begin(), logits.end());
  }
  return all_logits ? all : logits;
}

GenerateResult generate(ModelRunner& model, const tokenizer::Tokenizer& tokenizer,
                        const std::vector<int32_t>& prompt, const GenerateOptions& options,
                        const TextCallback& on_text) {
  if (prompt.empty()) throw Error("engine", "the prompt has no tokens");
  const int64_t n_ctx = model.n_ctx();
  if (static_cast<int64_t>(prompt.size()) >= n_ctx) {
    throw Error("engine", "the prompt has " + std::to_string(prompt.size()) +
                              " tokens but the context holds " + std::to_string(n_ctx));
  }
  GenerateResult result;
  result.n_prompt = static_cast<int64_t>(prompt.size());
  Sampler sampler(options.sampler);
  for (int32_t t : prompt) sampler.accept(t);
  tokenizer::StreamDecoder decoder(tokenizer);
  StopMatcher stops(options.stop_strings);
  bool keep_going = true;
  auto emit = [&](const std::string& text) {
    if (text.empty() || !keep_going) return;
    result.text += text;
    if (on_text && !on_text(text)) keep_going = false;
  };

  // Prefill in chunks; only the last prompt token needs logits.
  auto start = std::chrono::steady_clock::now();
  std::vector<float> logits = forward_sequence(model, prompt, options.seq, options.n_batch, false);
  result.prefill_seconds = seconds_since(start);
  Batch batch;

  start = std::chrono::steady_clock::now();
  int64_t pos = static_cast<int64_t>(prompt.size());
  const int64_t n_vocab = model.hparams().n_vocab;
  for (int64_t i = 0; options.n_predict < 0 || i < options.n_predict; ++i) {
    const int32_t token =
        sampler.sample(std::span<const float>(logits.data(), static_cast<size_t>(n_vocab)));
    if (options.stop_at_eog && tokenizer.is_eog(token)) {
      result.stop = StopReason::kEog;
      break;
    }
    result.tokens.push_back(token);
    sampler.accept(token);
    emit(stops.push(decoder.push(token)));
    if (stops.stopped()) {
      result.stop = StopReason::kStopString;
      break;
    }
    if (!keep_going) {
      result.stop = StopReason::kCallback;
      break;
    }
    if (options.n_predict >= 0 && i + 1 == options.n_predict)
      break;  // no pass for a token nobody reads
    if (pos >= n_ctx) {
      result.stop = StopReason::kContextFull;
      break;
    }
    batch.clear();
    batch.add(token, options.seq, static_cast<int32_t>(pos), true);
    model.forward(batch, logits);
    ++pos;
  }
  if (result.stop != StopReason::kStopString) emit(stops.push(decoder.flush()));
  emit(stops.flush());
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace herd::engine
