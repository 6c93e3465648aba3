#include "tokenizer/vocab.h"

#include <algorithm>
#include <limits>

#include "gguf/reader.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace herd::tokenizer {

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw Error("tokenizer", message);
}

TokenType to_token_type(int32_t code) {
  // Codes outside the table are treated like llama.cpp does: as undefined (plain) tokens.
  if (code < 0 || code > static_cast<int32_t>(TokenType::kByte)) return TokenType::kUndefined;
  return static_cast<TokenType>(code);
}

bool is_plain(TokenType t) {
  return t == TokenType::kNormal || t == TokenType::kUndefined;
}

// Texts that end a turn or a document in common chat models (llama.cpp's list).
// <|return|> and <|call|>: gpt-oss (o200k_harmony); [EOT] and [EOS]: Kimi K2; <turn|> (a
// turn's end) and <|tool_response> (a call made: the tool's turn comes next): Gemma 4.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",    "<|im_end|>",       "<|end|>",         "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>",       "<EOT>",           "[EOT]",
    "[EOS]",         "<|return|>",       "<|call|>",        "<eos>",
    "<turn|>",       "<|tool_response>", "<|end_of_text|>",
};
// In gpt-oss's harmony format <|end|> closes one message of a turn (the analysis before
// the final answer), and generation goes on with the next message; the turn ends with
// <|return|> or <|call|>. A vocabulary that has both of those is taken as harmony.
constexpr std::string_view kHarmonyEnd = "<|end|>";
constexpr std::string_view kHarmonyMarks[] = {"<|return|>", "<|call|>"};
// Candidates for the EOT id when the file does not name one, in order of preference.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<turn|>",  // Gemma 4
    "<|endoftext|>",
    "<EOT>",
    "[EOT]",  // Kimi K2
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> NN, anything else -> -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

Vocab Vocab::build(const VocabSpec& spec) {
  Vocab v;
  v.model_ = std::string(spec.model);
  if (spec.model == "llama") {
    v.kind_ = VocabKind::kSpm;
  } else if (spec.model == "gpt2") {
    v.kind_ = VocabKind::kBpe;
  } else if (spec.model == "bert") {
    v.kind_ = VocabKind::kWordPiece;
  } else {
    fail("unknown tokenizer model '" + std::string(spec.model) +
         "' (tokenizer.ggml.model); supported: llama (SentencePiece), gpt2 (byte-level BPE), "
         "bert (WordPiece)");
  }
  v.pre_ = std::string(spec.pre);
  v.load_tokens(spec);
  if (v.kind_ == VocabKind::kBpe) v.load_merges(spec);
  v.load_special_ids(spec);
  v.load_byte_tokens();
  return v;
}

void Vocab::load_tokens(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) fail("the vocabulary has no tokens (tokenizer.ggml.tokens is empty)");
  if (n >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("the vocabulary has too many tokens: " + std::to_string(n));
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    fail("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
         " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    fail("tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
         " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }

  size_t total = 0;
  for (std::string_view t : spec.tokens) total += t.size();
  if (total >= std::numeric_limits<uint32_t>::max()) fail("token texts exceed 4 GiB");
  arena_.reserve(total);
  offsets_.reserve(n + 1);
  types_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    offsets_.push_back(static_cast<uint32_t>(arena_.size()));
    arena_.insert(arena_.end(), spec.tokens[i].begin(), spec.tokens[i].end());
    types_.push_back(spec.token_types.empty() ? TokenType::kNormal
                                              : to_token_type(spec.token_types[i]));
  }
  offsets_.push_back(static_cast<uint32_t>(arena_.size()));
  if (kind_ == VocabKind::kSpm) scores_ = spec.scores;

  // Plain tokens first so that they win over a user-defined token of the same text
  // (DeepSeek adds user-defined copies of byte-level characters such as 'ø').
  text_to_id_.reserve(n);
  for (int32_t id = 0; id < n_tokens(); ++id) {
    if (is_plain(types_[id]) && !text(id).empty()) text_to_id_.emplace(text(id), id);
  }
  for (int32_t id = 0; id < n_tokens(); ++id) {
    if (types_[id] == TokenType::kUserDefined && !text(id).empty()) {
      text_to_id_.emplace(text(id), id);
    }
  }
  for (int32_t id = 0; id < n_tokens(); ++id) {
    const TokenType t = types_[id];
    if (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined) {
      special_tokens_.add(text(id), id, t == TokenType::kUserDefined);
    }
  }
}

void Vocab::load_merges(const VocabSpec& spec) {
  if (!spec.has_merges) {
    fail("a gpt2 (byte-level BPE) vocabulary needs tokenizer.ggml.merges, which is missing");
  }
  merges_.reserve(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string_view m = spec.merges[rank];
    // The separator is the first space after the first character: a left part never
    // contains a raw space (byte-level spells it 'Ġ'), but be exact about position 0.
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      fail("merge " + std::to_string(rank) + " '" + sanitize_utf8(m) +
           "' is not of the form 'left right'");
    }
    const std::string_view left = m.substr(0, space);
    const std::string_view right = m.substr(space + 1);
    const auto left_id = find(left);
    const auto right_id = find(right);
    joined.assign(left);
    joined.append(right);
    const auto result_id = find(joined);
    // A merge whose parts or result are not tokens can never apply; Hugging Face rejects
    // such files, llama.cpp ignores the merge in effect. Ignore it.
    if (!left_id || !right_id || !result_id) continue;
    merges_.emplace(pair_key(*left_id, *right_id),
                    BpeMerge{static_cast<int32_t>(rank), *result_id});
  }
}

void Vocab::load_special_ids(const VocabSpec& spec) {
  // An id outside the vocabulary is ignored (as llama.cpp does, with a warning there):
  // some converted files carry e.g. a padding id equal to the vocabulary size.
  auto in_range = [&](std::optional<int64_t> id) -> std::optional<int32_t> {
    if (id && *id >= 0 && *id < n_tokens()) return static_cast<int32_t>(*id);
    return std::nullopt;
  };
  auto by_text = [&](std::string_view t) -> std::optional<int32_t> {
    for (int32_t id = 0; id < n_tokens(); ++id) {
      if (text(id) == t) return id;
    }
    return std::nullopt;
  };
  auto or_default = [&](std::optional<int32_t> id, int64_t fallback) {
    return id ? id : in_range(fallback);
  };

  bos_ = in_range(spec.bos);
  eos_ = in_range(spec.eos);
  eot_ = in_range(spec.eot);
  eom_ = in_range(spec.eom);
  unk_ = in_range(spec.unk);
  sep_ = in_range(spec.sep);
  pad_ = in_range(spec.pad);
  cls_ = in_range(spec.cls);
  mask_ = in_range(spec.mask);

  bool add_bos_default = false;
  bool add_eos_default = false;
  bool add_space_prefix_default = false;
  switch (kind_) {
    case VocabKind::kSpm:
      // SentencePiece conventions when the file is silent: <unk> 0, <s> 1, </s> 2.
      unk_ = or_default(unk_, 0);
      bos_ = or_default(bos_, 1);
      eos_ = or_default(eos_, 2);
      add_bos_default = true;
      add_space_prefix_default = true;
      break;
    case VocabKind::kBpe:
      add_bos_default = pre_tokenizer_adds_bos(spec.pre);
      ignore_merges_ = pre_tokenizer_ignores_merges(spec.pre);
      break;
    case VocabKind::kWordPiece:
      if (!cls_) cls_ = by_text("[CLS]");
      if (!sep_) sep_ = by_text("[SEP]");
      if (!unk_) unk_ = by_text("[UNK]");
      if (!mask_) mask_ = by_text("[MASK]");
      if (!pad_) pad_ = by_text("[PAD]");
      if (!bos_) bos_ = cls_;
      word_piece_marks_continuations_ = uses_continuation_marks();
      add_bos_default = true;
      add_eos_default = true;
      break;
  }
  add_space_prefix_ = spec.add_space_prefix.value_or(add_space_prefix_default);

  const bool add_bos = spec.add_bos.value_or(add_bos_default);
  const bool add_eos = spec.add_eos.value_or(add_eos_default);
  const auto begin = kind_ == VocabKind::kWordPiece ? cls_ : bos_;
  const auto end = kind_ == VocabKind::kWordPiece ? sep_ : eos_;
  if (add_bos && !begin && spec.add_bos) {
    fail("tokenizer.ggml.add_bos_token is true but the vocabulary has no BOS token id");
  }
  if (add_eos && !end && spec.add_eos) {
    fail("tokenizer.ggml.add_eos_token is true but the vocabulary has no EOS token id");
  }
  if (add_bos) prefix_token_ = begin;
  if (add_eos) suffix_token_ = end;

  load_end_of_generation();
}

void Vocab::load_end_of_generation() {
  // The control (or user-defined) token spelled t; plain text never ends a turn.
  auto special_by_text = [&](std::string_view t) -> std::optional<int32_t> {
    for (int32_t id = 0; id < n_tokens(); ++id) {
      if (!is_plain(types_[id]) && text(id) == t) return id;
    }
    return std::nullopt;
  };
  bool harmony = true;
  for (std::string_view t : kHarmonyMarks) harmony = harmony && special_by_text(t).has_value();
  auto ends_generation = [&](std::string_view t) { return !(harmony && t == kHarmonyEnd); };

  if (!eot_) {
    for (std::string_view t : kEotTexts) {
      if (!ends_generation(t)) continue;
      if (const auto id = special_by_text(t)) {
        eot_ = id;
        break;
      }
    }
  }
  // Even when the file names <|end|> as EOS or EOT, a harmony turn does not end there.
  for (auto id : {eos_, eot_, eom_}) {
    if (id && ends_generation(text(*id))) eog_ids_.push_back(*id);
  }
  for (int32_t id = 0; id < n_tokens(); ++id) {
    if (is_plain(types_[id]) || types_[id] == TokenType::kByte) continue;
    for (std::string_view t : kEogTexts) {
      if (text(id) == t && ends_generation(t)) eog_ids_.push_back(id);
    }
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
}

void Vocab::load_byte_tokens() {
  byte_tokens_.fill(-1);
  if (kind_ == VocabKind::kSpm) {
    for (int32_t id = n_tokens() - 1; id >= 0; --id) {  // backwards: the first id wins
      const int b = byte_of_token(id);
      if (b >= 0) byte_tokens_[b] = id;
    }
  } else if (kind_ == VocabKind::kBpe) {
    std::string spelled;
    for (int b = 0; b < 256; ++b) {
      spelled.clear();
      append_utf8(spelled, byte_to_codepoint(static_cast<uint8_t>(b)));
      byte_tokens_[b] = find(spelled).value_or(-1);
    }
  }
}

bool Vocab::uses_continuation_marks() const {
  size_t word_starts = 0;
  size_t continuations = 0;
  for (int32_t id = 0; id < n_tokens(); ++id) {
    const std::string_view t = text(id);
    if (t.substr(0, 3) == "\xE2\x96\x81") ++word_starts;
    if (t.size() > 2 && t.substr(0, 2) == "##") ++continuations;
  }
  return continuations > word_starts;
}

int Vocab::byte_of_token(int32_t id) const {
  return types_[id] == TokenType::kByte ? parse_byte_token(text(id)) : -1;
}

bool Vocab::is_eog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

Vocab Vocab::from_gguf(const gguf::File& file) {
  constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
  VocabSpec spec;
  const auto model = file.get_string_or("tokenizer.ggml.model");
  if (!model) {
    fail(file.origin() + ": no tokenizer.ggml.model key; the file carries no vocabulary");
  }
  spec.model = *model;
  spec.pre = file.get_string_or("tokenizer.ggml.pre").value_or("");
  if (!file.has(kTokens)) {
    fail(file.origin() + ": no tokenizer.ggml.tokens array; the file carries no vocabulary");
  }
  spec.tokens = file.get_string_array(kTokens);
  if (file.has("tokenizer.ggml.scores")) spec.scores = file.get_f32_array("tokenizer.ggml.scores");
  if (file.has("tokenizer.ggml.token_type")) {
    spec.token_types = file.get_i32_array("tokenizer.ggml.token_type");
  }
  if (file.has("tokenizer.ggml.merges")) {
    spec.merges = file.get_string_array("tokenizer.ggml.merges");
    spec.has_merges = true;
  }
  auto id = [&](std::string_view key) -> std::optional<int64_t> {
    const auto value = file.get_u64_opt(key);
    if (!value) return std::nullopt;
    return *value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::optional<int64_t>(-1)
               : std::optional<int64_t>(static_cast<int64_t>(*value));
  };
  spec.bos = id("tokenizer.ggml.bos_token_id");
  spec.eos = id("tokenizer.ggml.eos_token_id");
  spec.eot = id("tokenizer.ggml.eot_token_id");
  spec.eom = id("tokenizer.ggml.eom_token_id");
  spec.unk = id("tokenizer.ggml.unknown_token_id");
  spec.sep = id("tokenizer.ggml.seperator_token_id");  // sic: GGUF's spelling
  spec.pad = id("tokenizer.ggml.padding_token_id");
  spec.cls = id("tokenizer.ggml.cls_token_id");
  spec.mask = id("tokenizer.ggml.mask_token_id");
  spec.add_bos = file.get_bool_opt("tokenizer.ggml.add_bos_token");
  spec.add_eos = file.get_bool_opt("tokenizer.ggml.add_eos_token");
  spec.add_space_prefix = file.get_bool_opt("tokenizer.ggml.add_space_prefix");
  try {
    return build(spec);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (in " + file.origin() + ")");
  }
}

}  // namespace herd::tokenizer
