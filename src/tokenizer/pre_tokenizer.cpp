#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace herd::tokenizer {

namespace {

// `\s` as Hugging Face (Rust/Oniguruma) and llama.cpp mean it: the Unicode White_Space
// property. Spelled out because PCRE2's own `\s` in UCP mode changed between versions
// (U+0085, U+180E), and the split must not depend on the installed library.
constexpr std::string_view kWhiteSpace =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

// Rewrites `\s` and `\S` of a pattern into explicit White_Space classes. Everything else
// (including other escapes) is copied as written.
std::string expand_white_space(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpace;
        } else {
          out += '[';
          out += kWhiteSpace;
          out += ']';
        }
      } else if (e == 'S' && !in_class) {
        out += "[^";
        out += kWhiteSpace;
        out += ']';
      } else {
        HERD_CHECK_MSG(e != 'S', "\\S inside a character class cannot be expanded");
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

// ---- the expressions, by family ----
// Written as in the tokenizers' own tokenizer.json files. Where those use `(?i:'s|...)`
// the case-insensitive contraction is spelled `'[sS]` so that Unicode case folding (long
// s, Kelvin sign) cannot make a difference.

constexpr std::string_view kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

constexpr std::string_view kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr std::string_view kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// DeepSeek LLM: letters of cased scripts (Latin, Greek, Cyrillic, Armenian, Georgian,
// Cherokee, Glagolitic, Coptic, Deseret, Osage, Old Hungarian, Warang Citi, Adlam and
// their fullwidth/compatibility forms), as listed in its tokenizer.json.
constexpr std::string_view kDeepseekLlmLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+";
// ASCII punctuation, fullwidth punctuation, curly quotes, ideographic space and marks.
constexpr std::string_view kDeepseekLlmPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
// CJK ideographs (and, as written upstream, everything from U+0800 up to them) and Hangul.
constexpr std::string_view kDeepseekCjk =
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

constexpr std::string_view kDeepseekV3 =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// o200k (GPT-4o, gpt-oss): words are an optional lead character, then upper-case-like
// letters and lower-case-like letters, so that "getUserName" is cut before each capital;
// combining marks (\p{M}) belong to the word; a contraction stays on its word; digits in
// threes. As in the tokenizer's own pattern (tiktoken's o200k_base, the gpt-oss
// tokenizer.json). llama.cpp's `gpt-4o` rewrites the letter classes as lookaheads over
// \p{L} for a regex engine without \p{Lu}; that drops \p{M} and cuts words at their
// combining marks where the original does not (a Khmer vowel sign in two strings of
// ../shared/vocab/ggml-vocab-gpt-4o.gguf.inp, see its README), so the original is kept.
constexpr std::string_view kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Kimi K2 (Moonshot's tokenization_kimi.py): o200k's word rules with Han taken out. A
// run of Han characters (\p{Han}, the Unicode script) is a piece of its own, and the
// letter classes exclude Han, so "北京Hello世界" is three pieces. Moonshot writes the
// exclusion as class intersection, [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]], which
// PCRE2 before 10.45 lacks. General categories partition the code points, so a union of
// categories minus Han is the complement of the other categories and Han:
//   [Lu Lt Lm Lo M] minus Han = [^\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}\p{Han}]
//   [Ll Lm Lo M] minus Han    = [^\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}\p{Han}]
// (checked equal over all code points). A lookahead (?!\p{Han}) before each letter says
// the same but split a 1 MiB run of capitals in 3.8 s instead of 0.27 s.
// llama.cpp hand-codes this expression with its own Han ranges (the CJK ideograph
// blocks) and without the upper/lower split; herd keeps the tokenizer's pattern, which
// the model was trained with.
constexpr std::string_view kKimiK2 =
    "\\p{Han}+|"
    "[^\\r\\n\\p{L}\\p{N}]?[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{Han}]*"
    "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{Han}]+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{Han}]+"
    "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{Han}]*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr std::string_view kBloom =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";

struct Family {
  std::vector<std::string_view> names;
  std::vector<std::string_view> patterns;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe"},
       {kLlama3}},
      {{"qwen2", "stablelm2", "megrez"}, {kQwen2}},
      {{"deepseek-llm"},
       {"[\\r\\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, "\\s+$", kDeepseekCjk, "\\p{N}+"}},
      {{"deepseek-coder"}, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"}},
      {{"gpt-4o"}, {kGpt4o}},
      {{"kimi-k2"}, {kKimiK2}},
      {{"deepseek-v3"},
       {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
        kDeepseekV3}},
      {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
        "jina-v2-de", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"},
       {kGpt2}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, "\\p{N}"}},
      {{"default", ""}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
  };
  return kFamilies;
}

const uint32_t kCompileOptions =
    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  explicit Compiled(pcre2_code* c) : code(c) {}
  ~Compiled() { pcre2_code_free(code); }
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::for_name(std::string_view pre) {
  for (const Family& family : families()) {
    if (std::find(family.names.begin(), family.names.end(), pre) != family.names.end()) {
      std::vector<std::string> patterns;
      for (std::string_view p : family.patterns) patterns.push_back(expand_white_space(p));
      return from_patterns(std::move(patterns));
    }
  }
  throw Error("tokenizer", "unknown pre-tokenizer '" + std::string(pre) +
                               "' (tokenizer.ggml.pre); known: llama3, llama-bpe, qwen2, "
                               "gpt-2, gpt-4o, deepseek-llm, deepseek-coder, deepseek-v3, "
                               "kimi-k2, falcon, starcoder, refact, default and their "
                               "aliases");
}

PreTokenizer PreTokenizer::from_patterns(std::vector<std::string> patterns) {
  PreTokenizer pt;
  for (const std::string& p : patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                     kCompileOptions, &error, &offset, nullptr);
    if (code == nullptr) {
      throw Error("tokenizer", "pre-tokenizer expression '" + p + "' does not compile at " +
                                   std::to_string(offset) + ": " + pcre2_message(error));
    }
    // JIT is an optimisation only: when it is unavailable the interpreter runs instead.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    pt.compiled_.push_back(std::make_unique<Compiled>(code));
  }
  pt.patterns_ = std::move(patterns);
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::vector<std::string_view>& scratch) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back(text);
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(pcre2_match_data_create(1, nullptr));
  if (!match) throw Error("tokenizer", "out of memory for PCRE2 match data");

  for (const auto& compiled : compiled_) {
    scratch.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t last_end = 0;
      size_t offset = 0;
      while (offset < piece.size()) {
        int rc =
            pcre2_match(compiled->code, subject, piece.size(), offset, 0, match.get(), nullptr);
        // The JIT's fixed stack can run out on very long runs of one class (e.g. a
        // megabyte of spaces); the interpreter keeps its frames on the heap.
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(compiled->code, subject, piece.size(), offset, PCRE2_NO_JIT, match.get(),
                           nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          throw Error("tokenizer", "pre-tokenizer match failed: " + pcre2_message(rc));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
        const size_t start = ovector[0];
        const size_t end = ovector[1];
        if (end <= start) {  // an empty match cuts nothing; step over one character
          if (start >= piece.size()) break;
          offset = start + decode_utf8(piece, start).length;
          continue;
        }
        if (start > last_end) scratch.push_back(piece.substr(last_end, start - last_end));
        scratch.push_back(piece.substr(start, end - start));
        last_end = offset = end;
      }
      if (last_end < piece.size()) scratch.push_back(piece.substr(last_end));
    }
    pieces.swap(scratch);
  }
}

bool pre_tokenizer_ignores_merges(std::string_view pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3";
}

bool pre_tokenizer_adds_bos(std::string_view pre) {
  return pre_tokenizer_ignores_merges(pre);
}

}  // namespace herd::tokenizer
