#include "engine/request_stream.h"

#include <utility>

namespace herd::engine {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

StreamUpdate RequestStream::wait(std::chrono::milliseconds timeout) {
  StreamUpdate out;
  wait(timeout, out);
  return out;
}

void RequestStream::wait(std::chrono::milliseconds timeout, StreamUpdate& into) {
  into.text.clear();
  into.tokens.clear();
  into.logprobs.clear();
  into.scores.clear();
  into.logits.clear();
  into.finish.reset();
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [&] {
    return !pending_.text.empty() || !pending_.tokens.empty() || !pending_.scores.empty() ||
           !pending_.logits.empty() || pending_.finish;
  });
  // The buffers trade places: the engine writes on into `into`'s old (empty) memory.
  std::swap(pending_, into);
}

void RequestStream::publish(const std::string& text, int32_t token, const TokenLogprob* logprob) {
  {
    std::lock_guard lock(mutex_);
    pending_.text += text;
    if (token >= 0) pending_.tokens.push_back(token);
    if (logprob) pending_.logprobs.push_back(*logprob);
  }
  cv_.notify_all();
}

void RequestStream::publish_logits(std::span<const float> row) {
  {
    std::lock_guard lock(mutex_);
    pending_.logits.insert(pending_.logits.end(), row.begin(), row.end());
  }
  cv_.notify_all();
}

void RequestStream::publish_score(const TokenScore& score) {
  {
    std::lock_guard lock(mutex_);
    pending_.scores.push_back(score);
  }
  cv_.notify_all();
}

void RequestStream::finish(const Finish& finish) {
  {
    std::lock_guard lock(mutex_);
    pending_.finish = finish;
  }
  cv_.notify_all();
}

}  // namespace herd::engine
