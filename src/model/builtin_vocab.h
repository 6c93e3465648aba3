// The small byte-level BPE vocabulary and ChatML template that `herd synth` embeds when no
// --vocab file is given, so that a fresh machine can run herd end to end with no download.
// 256 byte symbols (GPT-2 byte-to-unicode mapping), merges learned deterministically from
// a built-in English text, and the special tokens of the ChatML format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd {

struct BuiltinVocab {
  std::vector<std::string> tokens;   // token text as stored in GGUF (byte-level mapped)
  std::vector<int32_t> token_types;  // 1 normal, 3 control, 4 user-defined
  std::vector<std::string> merges;   // "left right", by rank
  int32_t bos_id;                    // <|endoftext|> (not added: add_bos is false)
  int32_t eos_id;                    // <|im_end|>
  int32_t pad_id;
  std::string chat_template;  // ChatML with tools and <think> support
};

// Builds the vocabulary (deterministic: the same on every machine and every run).
BuiltinVocab make_builtin_vocab();

// The GPT-2 byte-to-unicode mapping: the UTF-8 text of the symbol that stands for byte b.
std::string byte_to_symbol(uint8_t b);

}  // namespace herd
