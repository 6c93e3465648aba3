// Byte-level BPE pre-tokenizers: the regular expressions that cut text into words before
// merges run, one list per `tokenizer.ggml.pre` name. A list of several expressions is
// applied in sequence, as Hugging Face's Sequence of Split pre-tokenizers (and llama.cpp)
// do: the text is cut by the first expression, then every piece by the next, and so on.
// A cut keeps both the matches and the text between them, so no byte is ever lost.
//
// Expressions are compiled once with PCRE2 (UTF + Unicode properties, JIT) and are then
// immutable: split() may be called from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace herd::tokenizer {

class PreTokenizer {
 public:
  // The expressions for a `tokenizer.ggml.pre` name ("" means "default").
  // Throws herd::Error("[tokenizer] unknown pre-tokenizer ...") for a name it does not know.
  static PreTokenizer for_name(std::string_view pre);
  // Compiles the given expressions (PCRE2 syntax). Throws herd::Error on a bad pattern.
  static PreTokenizer from_patterns(std::vector<std::string> patterns);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Cuts text into pieces (views into text, in order, covering it exactly), replacing the
  // content of `pieces`. Invalid UTF-8 never matches an expression, so it ends up in the
  // pieces between matches. `scratch` is reused between calls to avoid allocations.
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             std::vector<std::string_view>& scratch) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  PreTokenizer() = default;

  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// Whether a pre-tokenizer name asks byte-level BPE to look whole words up in the
// vocabulary before merging (Hugging Face's `ignore_merges`, used by Llama 3).
bool pre_tokenizer_ignores_merges(std::string_view pre);

// Whether a pre-tokenizer name implies adding BOS when the file does not say.
bool pre_tokenizer_adds_bos(std::string_view pre);

}  // namespace herd::tokenizer
