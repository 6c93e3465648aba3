#include "server/json_token_filter.h"

#include <algorithm>

namespace herd::server {
namespace {

std::vector<std::string> token_texts(const tokenizer::Tokenizer& tokenizer, bool render_special) {
  std::vector<std::string> texts(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    // End tokens end the reply instead of adding text (see JsonTokenFilter::allows).
    if (tokenizer.is_eog(id)) continue;
    tokenizer.append_piece(id, render_special, texts[static_cast<size_t>(id)]);
  }
  return texts;
}

}  // namespace

ConstraintVocabulary::ConstraintVocabulary(const tokenizer::Tokenizer& tokenizer,
                                           bool render_special)
    : texts(token_texts(tokenizer, render_special)),
      strips_leading_space(tokenizer.strips_leading_space()),
      trie(texts) {
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    if (tokenizer.is_eog(id)) end_tokens.push_back(id);
  }
}

std::shared_ptr<const ConstraintVocabulary> ConstraintVocabularies::get(bool render_special) {
  std::lock_guard lock(mutex_);
  std::shared_ptr<const ConstraintVocabulary>& v = built_[render_special ? 1 : 0];
  if (!v) v = std::make_shared<const ConstraintVocabulary>(*tokenizer_, render_special);
  return v;
}

JsonTokenFilter::JsonTokenFilter(std::shared_ptr<const JsonGrammar> grammar,
                                 const ConstraintVocabulary& vocabulary)
    : grammar_(std::move(grammar)),
      vocabulary_(&vocabulary),
      state_(*grammar_),
      probe_(*grammar_) {}

std::string_view JsonTokenFilter::shown(int32_t token) const {
  std::string_view text = vocabulary_->texts[static_cast<size_t>(token)];
  if (first_piece_ && vocabulary_->strips_leading_space && text.starts_with(' ')) {
    text.remove_prefix(1);
  }
  return text;
}

bool JsonTokenFilter::allows(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocabulary_->texts.size()) return false;
  const auto& ends = vocabulary_->end_tokens;
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) return state_.can_end();
  const std::string_view text = shown(token);
  if (text.empty()) return false;  // no progress: a model could repeat it forever
  probe_ = state_;
  return probe_.push(text);
}

void JsonTokenFilter::allowed_tokens(std::span<uint8_t> allowed) {
  const bool skip_space = first_piece_ && vocabulary_->strips_leading_space;
  vocabulary_->trie.walk(state_, skip_space, allowed, scratch_);
  if (state_.can_end()) {
    for (int32_t t : vocabulary_->end_tokens) allowed[static_cast<size_t>(t)] = 1;
  }
}

void JsonTokenFilter::accept(int32_t token) {
  const std::string_view text = shown(token);
  if (text.empty()) return;
  state_.push(text);
  first_piece_ = false;
}

}  // namespace herd::server
