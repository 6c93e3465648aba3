// What a model listing shows of the served file (Ollama's /api/tags, /api/show and /api/ps):
// its family, size, parameter count, quantization, a digest and its GGUF metadata. Read once,
// when the model is loaded; cheap (the header and tensor table only, no weights).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace herd::gguf {
class File;
}

namespace herd::server {

struct ModelFacts {
  std::string family;         // general.architecture ("qwen3")
  int64_t parameters = 0;     // elements of every tensor in the file
  std::string quantization;   // general.file_type's name ("Q4_K_M"), else "unknown"
  uint64_t size_bytes = 0;    // the file's size (a split model's: all its files')
  int64_t modified_unix = 0;  // the file's last modification (Unix seconds; 0: unknown)
  std::string digest;         // hex SHA-256 of the file's header (metadata and tensor table),
                              // a split model's: of every file's header in order
  nlohmann::json metadata;    // the scalar GGUF metadata (arrays as null, as Ollama shows)
};

// Facts of `file` (its size and time from the files it was opened from; files that cannot be
// read, or bytes parsed from memory, leave them 0).
ModelFacts read_model_facts(const gguf::File& file);

// llama.cpp's name of a general.file_type (llama_ftype), "unknown" for another number.
std::string file_type_name(uint64_t file_type);

// A parameter count as Ollama writes it: "494.03M", "8.0B".
std::string parameter_size(int64_t parameters);

}  // namespace herd::server
