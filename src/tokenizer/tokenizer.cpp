#include "tokenizer/tokenizer.h"

#include "gguf/reader.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/spm.h"
#include "tokenizer/word_piece.h"
#include "util/error.h"

namespace herd::tokenizer {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 '▁'

void append_unescaped_spaces(std::string& out, std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
      out += ' ';
      pos += kSpaceMark.size();
    } else {
      out += text[pos++];
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  return from_vocab(Vocab::from_gguf(file));
}

Tokenizer Tokenizer::from_vocab(Vocab vocab) {
  Tokenizer t;
  if (vocab.kind() == VocabKind::kBpe) {
    t.pre_tokenizer_ = std::make_unique<const PreTokenizer>(PreTokenizer::for_name(vocab.pre()));
  }
  t.vocab_ = std::make_unique<const Vocab>(std::move(vocab));
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && v.prefix_token()) out.push_back(*v.prefix_token());

  // Only the encoder of this vocabulary's kind is ever used; each keeps its buffers
  // across the fragments between special tokens.
  std::optional<SpmSession> spm;
  std::optional<BpeSession> bpe;
  std::optional<WordPieceSession> word_piece;
  switch (v.kind()) {
    case VocabKind::kSpm:
      spm.emplace(v);
      break;
    case VocabKind::kBpe:
      bpe.emplace(v, *pre_tokenizer_);
      break;
    case VocabKind::kWordPiece:
      word_piece.emplace(v);
      break;
  }
  // SentencePiece puts its '▁' before the text and again after every special token
  // (llama.cpp's behaviour, matching the original tokenizer on chat prompts).
  bool after_special = true;
  auto encode_plain = [&](std::string_view fragment) {
    if (spm) spm->encode(fragment, v.add_space_prefix() && after_special, out);
    if (bpe) bpe->encode(fragment, out);
    if (word_piece) word_piece->encode(fragment, out);
    after_special = false;
  };

  size_t pos = 0;
  while (pos < text.size()) {
    const auto match = v.special_tokens().find(text, pos, parse_special);
    const size_t plain_end = match ? match->start : text.size();
    if (plain_end > pos) encode_plain(text.substr(pos, plain_end - pos));
    if (!match) break;
    out.push_back(match->id);
    after_special = true;
    pos = match->start + match->length;
  }

  if (add_special && v.suffix_token()) out.push_back(*v.suffix_token());
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  if (!vocab_->valid_id(id)) {
    throw Error("tokenizer", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                 std::to_string(vocab_->n_tokens()) + ")");
  }
}

bool Tokenizer::is_control(int32_t id) const {
  return vocab_->valid_id(id) && vocab_->type(id) == TokenType::kControl;
}

bool Tokenizer::strips_leading_space() const {
  return (vocab_->kind() == VocabKind::kSpm && vocab_->add_space_prefix()) ||
         vocab_->kind() == VocabKind::kWordPiece;
}

void Tokenizer::append_piece(int32_t id, bool render_special, std::string& out) const {
  check_id(id);
  const Vocab& v = *vocab_;
  const std::string_view text = v.text(id);
  switch (v.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      if (render_special) out.append(text);
      return;
    case TokenType::kUserDefined:
      out.append(text);  // stored as the raw text it matches
      return;
    case TokenType::kByte:
      if (const int b = v.byte_of_token(id); b >= 0) {
        out += static_cast<char>(b);
        return;
      }
      break;  // not "<0xNN>": render as a plain token
    case TokenType::kNormal:
    case TokenType::kUndefined:
      break;
  }
  switch (v.kind()) {
    case VocabKind::kSpm:
      append_unescaped_spaces(out, text);
      break;
    case VocabKind::kBpe:
      append_byte_level_decoded(out, text);
      break;
    case VocabKind::kWordPiece:
      if (!v.word_piece_marks_continuations()) {
        append_unescaped_spaces(out, text);  // "▁word" starts a word, "piece" continues
      } else if (text.substr(0, 2) == "##") {
        out.append(text.substr(2));
      } else {
        out += ' ';
        out.append(text);
      }
      break;
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool first_piece = true;
  const bool strip = strips_leading_space();
  for (int32_t id : ids) {
    const size_t before = out.size();
    append_piece(id, render_special, out);
    if (out.size() == before) continue;
    if (first_piece && strip && out[before] == ' ') out.erase(before, 1);
    first_piece = false;
  }
  return out;
}

}  // namespace herd::tokenizer
