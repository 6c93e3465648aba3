// Tokenizer: text <-> token ids for a model's vocabulary (SentencePiece BPE, byte-level
// BPE or WordPiece, chosen by the file). Built once, immutable afterwards; encode and
// decode are const and safe to call from many threads at once (each call keeps its own
// scratch state). It copies what it needs from the GGUF file, which may be closed after.
//
//   auto file = gguf::File::open(path);
//   auto tok = tokenizer::Tokenizer::from_gguf(file);
//   std::vector<int32_t> ids = tok.encode("Hello", /*add_special=*/true, /*parse_special=*/true);
//   std::string text = tok.decode(ids);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace herd::gguf {
class File;
}

namespace herd::tokenizer {

class Tokenizer {
 public:
  // Throws herd::Error("[tokenizer] ...") for a missing or malformed vocabulary.
  static Tokenizer from_gguf(const gguf::File& file);
  static Tokenizer from_vocab(Vocab vocab);

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: add what the model puts around a text (BOS and/or EOS per the file's
  // add_bos_token/add_eos_token and the model's defaults; [CLS] ... [SEP] for BERT).
  // parse_special: text of control tokens ("<|im_start|>") becomes those tokens; when
  // false it is plain text. User-defined tokens are matched either way.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes the ids stand for. Control (and unknown) tokens are left out unless
  // render_special. The leading space SentencePiece adds when encoding is removed from the
  // first piece (and the word separator WordPiece decoding puts before it).
  // The result can be invalid UTF-8 when the ids cut a character; see StreamDecoder.
  // Throws herd::Error for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  // The bytes of one token as it appears in running text (SentencePiece '▁' as a space,
  // "<0xNN>" as its byte, byte-level characters as their bytes, "##x" as "x" and a plain
  // WordPiece word with a space before it). Appends to out.
  void append_piece(int32_t id, bool render_special, std::string& out) const;
  // Whether the first rendered piece of a text loses one leading space.
  bool strips_leading_space() const;

  // The token's text as stored in the vocabulary. REQUIRES: 0 <= id < n_vocab().
  std::string_view token_text(int32_t id) const { return vocab_->text(id); }
  int32_t n_vocab() const { return vocab_->n_tokens(); }
  const Vocab& vocab() const { return *vocab_; }

  std::optional<int32_t> bos() const { return vocab_->bos(); }
  std::optional<int32_t> eos() const { return vocab_->eos(); }
  std::optional<int32_t> eot() const { return vocab_->eot(); }
  bool is_control(int32_t id) const;
  bool is_eog(int32_t id) const { return vocab_->valid_id(id) && vocab_->is_eog(id); }

 private:
  Tokenizer() = default;
  void check_id(int32_t id) const;

  // Held by pointer so that the encoders' references stay valid when a Tokenizer moves.
  std::unique_ptr<const Vocab> vocab_;
  std::unique_ptr<const PreTokenizer> pre_tokenizer_;  // byte-level BPE only
};

}  // namespace herd::tokenizer
