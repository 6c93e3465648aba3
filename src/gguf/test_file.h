// A small valid GGUF file built with the writer, shared by the reader and writer tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::gguf::testing {

// Writes a file with a few metadata values of every kind and two tensors (f32 [3, 2] and
// q8_0 [32]) to path, and returns its bytes.
std::vector<uint8_t> write_small_file(const std::string& path);

}  // namespace herd::gguf::testing
