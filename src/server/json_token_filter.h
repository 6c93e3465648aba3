// JsonTokenFilter: the sampler's TokenFilter for a reply held to a JsonGrammar. It runs a
// JsonConstraint over each token's bytes as the decoder will show them; the whole allowed
// set comes from one walk of the vocabulary's trie (engine/token_trie.h), done only when
// the sampler's first draw was refused.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/token_filter.h"
#include "engine/token_trie.h"
#include "server/json_constraint.h"
#include "tokenizer/tokenizer.h"

namespace herd::server {

// A vocabulary as a constraint sees it: the bytes each token adds to a reply and the trie
// over them. Built once per tokenizer and render_special (a few milliseconds for 150k
// tokens); immutable, shared by every constrained request.
struct ConstraintVocabulary {
  ConstraintVocabulary(const tokenizer::Tokenizer& tokenizer, bool render_special);

  std::vector<std::string> texts;     // [n_vocab]; empty: never allowed (control tokens)
  std::vector<int32_t> end_tokens;    // end-of-generation tokens: allowed once the reply is whole
  bool strips_leading_space = false;  // the first piece's leading space is not shown
  engine::TokenTrie trie;
};

class JsonTokenFilter final : public engine::TokenFilter {
 public:
  // REQUIRES: vocabulary outlives the filter.
  JsonTokenFilter(std::shared_ptr<const JsonGrammar> grammar,
                  const ConstraintVocabulary& vocabulary);

  bool allows(int32_t token) override;
  void allowed_tokens(std::span<uint8_t> allowed) override;
  // Moves on past `token` (one allows() said yes to, or an end token).
  void accept(int32_t token) override;
  // The reply is a whole JSON value: generation ends here.
  bool complete() const override { return state_.complete(); }

 private:
  // The bytes `token` adds as the decoder shows them (without the first piece's space).
  std::string_view shown(int32_t token) const;

  std::shared_ptr<const JsonGrammar> grammar_;
  const ConstraintVocabulary* vocabulary_;
  JsonConstraint state_;
  JsonConstraint probe_;
  std::vector<JsonConstraint> scratch_;  // the trie walk's states, one per depth
  bool first_piece_ = true;
};

// A reply held to a JSON grammar, as the scheduler takes it (GenerationParams::constraint):
// each request's filter starts from the grammar's beginning over a shared vocabulary.
class JsonReplyConstraint final : public engine::TokenConstraint {
 public:
  JsonReplyConstraint(std::shared_ptr<const JsonGrammar> grammar,
                      std::shared_ptr<const ConstraintVocabulary> vocabulary)
      : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {}
  std::unique_ptr<engine::TokenFilter> start() const override {
    return std::make_unique<JsonTokenFilter>(grammar_, *vocabulary_);
  }

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const ConstraintVocabulary> vocabulary_;
};

// The constraint vocabularies of one tokenizer (with and without control tokens rendered),
// each built on first use. Thread-safe.
class ConstraintVocabularies {
 public:
  // REQUIRES: tokenizer outlives this.
  explicit ConstraintVocabularies(const tokenizer::Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::shared_ptr<const ConstraintVocabulary> get(bool render_special);
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  const tokenizer::Tokenizer* tokenizer_;
  std::mutex mutex_;
  std::shared_ptr<const ConstraintVocabulary> built_[2];  // [render_special]
};

}  // namespace herd::server
