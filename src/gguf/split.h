// Models split in several GGUF files, as llama.cpp's llama-gguf-split writes them:
//
//   NAME-00001-of-00003.gguf   every metadata key of the model, split.*, tensors 0 .. a
//   NAME-00002-of-00003.gguf   split.* only, tensors a+1 .. b
//   NAME-00003-of-00003.gguf   split.* only, tensors b+1 .. n-1
//
// Every file is a complete GGUF file with its own header, tensor table, alignment and data
// section; each lists only its own tensors (the first may list none). Keys in every file:
//   split.no            u16  this file's index, from 0 (its name's number minus one)
//   split.count         u16  how many files the model has
//   split.tensors.count i32  how many tensors all of them hold together
//
// gguf::File::open(any file of the set) opens them all as one File (split.cpp): the
// metadata is the first file's, with the split.* keys left out (they describe files, not
// the model); the tensors are every file's, each pointing into its own file's mapping. It
// throws a herd::Error naming the file and the problem when a file is missing, a file's
// split.no or split.count disagrees with its name, a file belongs to another set (its
// split.count or split.tensors.count differ, or it repeats a tensor), or the files together
// hold another number of tensors than split.tensors.count. A truncated file fails as any
// GGUF file does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace herd::gguf {

inline constexpr std::string_view kSplitNo = "split.no";
inline constexpr std::string_view kSplitCount = "split.count";
inline constexpr std::string_view kSplitTensorsCount = "split.tensors.count";

// Writes `model` as `n_files` files PREFIX-00001-of-0000N.gguf ... (tensors in their order,
// as even a share per file as whole tensors allow; every file holds at least one), each
// renamed into place only when complete. Returns their paths in order. Throws herd::Error
// when n_files is not in [1, number of tensors] (nor above 65535) or a file cannot be written.
std::vector<std::string> write_split(const File& model, const std::string& prefix, int n_files);

}  // namespace herd::gguf
