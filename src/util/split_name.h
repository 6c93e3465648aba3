// The names llama.cpp's llama-gguf-split gives the files of a model split in several:
//   PREFIX-00001-of-00003.gguf, PREFIX-00002-of-00003.gguf, PREFIX-00003-of-00003.gguf
// (parts numbered from 1, five digits each). Pure string work, no I/O: the store groups a
// repository's files by these names, the GGUF reader finds a set's other files by them, and
// a model directory lists a set once.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace herd {

struct SplitName {
  std::string prefix;  // "dir/Model-Q4_K_M"
  int part = 0;        // 1 .. of
  int of = 0;
  std::string suffix;  // "-of-00003.gguf", as written (the case kept)

  // The name of part `n` of the same set (1 .. of).
  std::string part_path(int n) const;
};

// nullopt unless `path` ends in -NNNNN-of-MMMMM.gguf (any case) with 1 <= NNNNN <= MMMMM.
std::optional<SplitName> parse_split_name(std::string_view path);

// The path without ".gguf" and without a split suffix: "dir/M-00001-of-00002.gguf" and
// "dir/M.gguf" are both "dir/M". A path not ending in ".gguf" (any case) is kept whole.
std::string model_stem(std::string_view path);

}  // namespace herd
