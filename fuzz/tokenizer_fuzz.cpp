// libFuzzer target: arbitrary bytes are encoded with a SentencePiece vocabulary or one of
// four byte-level BPE vocabularies, each with its own pre-tokenizer (the files of ../shared
// when reachable, otherwise tiny built-in vocabularies with the same pre-tokenizer), and
// decoded again. Checked:
//   - plain encoding round-trips exactly (all have a token for every byte);
//   - streaming decode emits only valid UTF-8 and adds up to the sanitized full decode;
//   - nothing throws, crashes or trips a sanitizer for any flags.
// The first input byte picks the vocabulary and the flags; the rest is the text:
//   bit 0      SentencePiece (the Llama test model), else byte-level BPE;
//   bits 1-3   add_special, parse_special, render_special (of the streaming decode);
//   bits 4-5   which BPE: the Qwen2 test model (qwen2), DeepSeek V3 (deepseek-v3), gpt-oss
//              (gpt-4o), Kimi K2 (kimi-k2; built-in only, ../shared has no Kimi file).
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using herd::tokenizer::Tokenizer;
using herd::tokenizer::Vocab;
using herd::tokenizer::VocabSpec;

// `file` is relative to the shared folder ("models/qwen2-f32.gguf"); nullptr loads nothing.
std::unique_ptr<Tokenizer> load_shared(const char* file) {
  if (file == nullptr) return nullptr;
  const char* env = std::getenv("HERD_SHARED");
  for (std::string dir : {std::string(env ? env : ""), std::string("../shared"),
                          std::string("../../shared"), std::string("../../../shared")}) {
    if (dir.empty()) continue;
    const std::string path = dir + "/" + file;
    if (std::filesystem::exists(path)) {
      return std::make_unique<Tokenizer>(Tokenizer::from_gguf(herd::gguf::File::open(path)));
    }
  }
  return nullptr;
}

// Built-in fallbacks: every byte as a token, a few merges / pieces, two control tokens.
// `pre` names the BPE pre-tokenizer.
std::unique_ptr<Tokenizer> builtin(bool spm, const char* pre) {
  std::vector<std::string> texts = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  if (spm) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      texts.push_back(name);
      types.push_back(6);
    }
    for (const char* piece : {"\xE2\x96\x81", "a", "b", "ab",
                              "\xE2\x96\x81"
                              "a",
                              "\xC3\xA9"}) {
      texts.push_back(piece);
      types.push_back(1);
    }
  } else {
    std::string spelled;
    for (int b = 0; b < 256; ++b) {
      spelled.clear();
      herd::tokenizer::append_utf8(spelled, herd::tokenizer::byte_to_codepoint(b));
      texts.push_back(spelled);
      types.push_back(1);
    }
    texts.push_back("ab");
    texts.push_back(
        "\xC4\xA0"
        "a");  // "Ġa"
    types.insert(types.end(), {1, 1});
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  const std::vector<std::string_view> merges = {"a b", "\xC4\xA0 a"};
  VocabSpec spec;
  spec.model = spm ? "llama" : "gpt2";
  spec.pre = spm ? "" : pre;
  spec.tokens = views;
  spec.token_types = types;
  if (!spm) {
    spec.merges = merges;
    spec.has_merges = true;
  }
  return std::make_unique<Tokenizer>(Tokenizer::from_vocab(Vocab::build(spec)));
}

struct BpeChoice {
  const char* file;  // under ../shared, or nullptr
  const char* pre;   // the file's tokenizer.ggml.pre, for the built-in fallback
};
constexpr BpeChoice kBpeChoices[4] = {
    {"models/qwen2-f32.gguf", "qwen2"},
    {"vocab/ggml-vocab-deepseek-v3.gguf", "deepseek-v3"},
    {"vocab/ggml-vocab-gpt-4o.gguf", "gpt-4o"},
    {nullptr, "kimi-k2"},
};

// Loaded once, all together (the two large vocabularies take a few seconds).
const Tokenizer& tokenizer(bool spm, unsigned bpe_choice) {
  static const std::unique_ptr<Tokenizer> kSpm = [] {
    auto t = load_shared("models/llama-f16.gguf");
    return t ? std::move(t) : builtin(true, "");
  }();
  static const std::array<std::unique_ptr<Tokenizer>, 4> kBpe = [] {
    std::array<std::unique_ptr<Tokenizer>, 4> all;
    for (size_t i = 0; i < all.size(); ++i) {
      all[i] = load_shared(kBpeChoices[i].file);
      if (!all[i]) all[i] = builtin(false, kBpeChoices[i].pre);
    }
    return all;
  }();
  return spm ? *kSpm : *kBpe[bpe_choice];
}

}  // namespace

// Loads every vocabulary before the first input, so that loading (seconds for the two
// large ones under the sanitizers) does not count against the per-input -timeout.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tokenizer(true, 0);
  tokenizer(false, 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool spm = selector & 1;
  const bool add_special = selector & 2;
  const bool parse_special = selector & 4;
  const Tokenizer& tok = tokenizer(spm, (selector >> 4) & 3);

  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  }
  const std::string decoded = tok.decode(ids);

  // SentencePiece spells spaces as U+2581, so that character itself does not survive.
  const bool lossless = !spm || text.find("\xE2\x96\x81") == std::string_view::npos;
  if (!add_special && !parse_special && lossless && decoded != text) std::abort();

  herd::tokenizer::StreamDecoder stream(tok, /*render_special=*/selector & 8);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = stream.push(id);
    if (herd::tokenizer::sanitize_utf8(chunk) != chunk) std::abort();
    streamed += chunk;
  }
  streamed += stream.flush();
  if (!(selector & 8) && streamed != herd::tokenizer::sanitize_utf8(decoded)) std::abort();
  return 0;
}
