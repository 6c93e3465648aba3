// Vocabulary: the immutable table a tokenizer runs on (token texts, types, scores, merges,
// special ids and the file's flags), built once from GGUF metadata and shared read-only
// by every encode/decode call (thread-safe to read). Per-call state lives in the
// encoders (spm.h, bpe.h, word_piece.h), as llama.cpp separates llama_vocab from its
// tokenizer sessions.
//
// GGUF keys read (all under tokenizer.ggml.):
//   model            "llama" (SentencePiece BPE, SPM) | "gpt2" (byte-level BPE) | "bert"
//   pre              pre-tokenizer name for gpt2 (absent: "default")
//   tokens           string[n]                     required
//   scores           f32[n]                        optional (SPM merge priorities)
//   token_type       i32[n]                        optional (TokenType codes)
//   merges           string[m] "left right"       required for gpt2
//   bos/eos/eot/eom/unknown/seperator/padding/cls/mask_token_id   optional u32
//   add_bos_token, add_eos_token, add_space_prefix                 optional bool
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/special_tokens.h"

namespace herd::gguf {
class File;
}

namespace herd::tokenizer {

// GGUF token_type codes (llama.cpp's llama_token_type).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind : uint8_t {
  kSpm,        // "llama": SentencePiece BPE over scores, byte fallback
  kBpe,        // "gpt2": byte-level BPE over merge ranks, regex pre-tokenizer
  kWordPiece,  // "bert": BERT normalizer + greedy longest-match WordPiece
};

// Everything a vocabulary is made of, as read from a file. The views must stay valid
// while Vocab::build runs (Vocab copies what it keeps).
struct VocabSpec {
  std::string_view model;
  std::string_view pre;  // "" when absent
  std::vector<std::string_view> tokens;
  std::vector<float> scores;         // empty, or one per token
  std::vector<int32_t> token_types;  // empty, or one per token
  std::vector<std::string_view> merges;
  bool has_merges = false;  // distinguishes "no merges key" from an empty list
  std::optional<int64_t> bos, eos, eot, eom, unk, sep, pad, cls, mask;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// One BPE merge: the pair's rank (lower merges first) and the token it makes.
struct BpeMerge {
  int32_t rank = 0;
  int32_t result = 0;
};

class Vocab {
 public:
  // Throws herd::Error("[tokenizer] ...") naming the problem: unknown model, missing or
  // mismatched arrays, special ids out of range, unknown pre-tokenizer.
  static Vocab build(const VocabSpec& spec);
  static Vocab from_gguf(const gguf::File& file);

  Vocab(Vocab&&) noexcept = default;
  Vocab& operator=(Vocab&&) noexcept = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabKind kind() const { return kind_; }
  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }
  int32_t n_tokens() const { return static_cast<int32_t>(types_.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < n_tokens(); }

  // REQUIRES: valid_id(id).
  std::string_view text(int32_t id) const {
    return {arena_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
  }
  TokenType type(int32_t id) const { return types_[id]; }
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[id]; }

  // The token spelled exactly `text`, among tokens that plain text may produce (normal
  // and user-defined; a normal token wins when both spell the same text).
  std::optional<int32_t> find(std::string_view text) const {
    auto it = text_to_id_.find(text);
    if (it == text_to_id_.end()) return std::nullopt;
    return it->second;
  }
  // The merge of two adjacent tokens, or nullptr. BPE only.
  const BpeMerge* merge(int32_t left, int32_t right) const {
    auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }
  size_t n_merges() const { return merges_.size(); }
  // The token that stands for one raw byte: SPM's "<0xNN>", BPE's byte-level character.
  // -1 when the vocabulary has none.
  int32_t byte_token(uint8_t b) const { return byte_tokens_[b]; }
  // For a byte token ("<0xNN>"), its byte; otherwise -1.
  int byte_of_token(int32_t id) const;

  const SpecialTokenMatcher& special_tokens() const { return special_tokens_; }

  std::optional<int32_t> bos() const { return bos_; }
  std::optional<int32_t> eos() const { return eos_; }
  std::optional<int32_t> eot() const { return eot_; }
  std::optional<int32_t> unk() const { return unk_; }
  std::optional<int32_t> sep() const { return sep_; }
  std::optional<int32_t> pad() const { return pad_; }
  std::optional<int32_t> cls() const { return cls_; }
  std::optional<int32_t> mask() const { return mask_; }
  // What add_special puts before and after the text (BOS/EOS per the file's flags and
  // the model's defaults; [CLS]/[SEP] for WordPiece).
  std::optional<int32_t> prefix_token() const { return prefix_token_; }
  std::optional<int32_t> suffix_token() const { return suffix_token_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool ignore_merges() const { return ignore_merges_; }
  // WordPiece spelling. GGUF files (convert_hf_to_gguf) mark word starts: "▁hello" and
  // a continuation "llo"; Hugging Face's vocab.txt marks continuations: "hello", "##llo".
  // True for the Hugging Face spelling (detected from the tokens).
  bool word_piece_marks_continuations() const { return word_piece_marks_continuations_; }
  // End of generation: EOS, EOT, EOM and the control tokens chat models end turns with.
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

 private:
  Vocab() = default;
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void load_tokens(const VocabSpec& spec);
  void load_merges(const VocabSpec& spec);
  void load_special_ids(const VocabSpec& spec);
  void load_end_of_generation();  // eot_ (when the file has none) and eog_ids_
  void load_byte_tokens();
  bool uses_continuation_marks() const;

  VocabKind kind_ = VocabKind::kSpm;
  std::string model_;
  std::string pre_;
  // All token texts back to back; token i is arena_[offsets_[i], offsets_[i + 1]).
  // A vector (not a string) so that moving the Vocab never moves the bytes the
  // text_to_id_ keys point at (a short std::string would move them).
  std::vector<char> arena_;
  std::vector<uint32_t> offsets_;  // [n_tokens + 1]
  std::vector<TokenType> types_;   // [n_tokens]
  std::vector<float> scores_;      // [n_tokens] or empty
  std::unordered_map<std::string_view, int32_t> text_to_id_;
  std::unordered_map<uint64_t, BpeMerge> merges_;  // (left << 32 | right) -> merge
  std::array<int32_t, 256> byte_tokens_{};
  SpecialTokenMatcher special_tokens_;

  std::optional<int32_t> bos_, eos_, eot_, eom_, unk_, sep_, pad_, cls_, mask_;
  std::optional<int32_t> prefix_token_, suffix_token_;
  bool add_space_prefix_ = false;
  bool ignore_merges_ = false;
  bool word_piece_marks_continuations_ = false;
  std::vector<int32_t> eog_ids_;  // sorted
};

}  // namespace herd::tokenizer
