#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace herd::tokenizer {

std::string StreamDecoder::push(int32_t id) {
  const size_t before = pending_.size();
  tokenizer_->append_piece(id, render_special_, pending_);
  if (pending_.size() > before) {
    if (first_piece_ && tokenizer_->strips_leading_space() && pending_[before] == ' ') {
      pending_.erase(before, 1);
    }
    first_piece_ = false;
  }
  const size_t held = utf8_incomplete_tail(pending_);
  std::string complete =
      sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - held));
  pending_.erase(0, pending_.size() - held);
  return complete;
}

std::string StreamDecoder::flush() {
  std::string rest = sanitize_utf8(pending_);
  pending_.clear();
  first_piece_ = true;
  return rest;
}

}  // namespace herd::tokenizer
