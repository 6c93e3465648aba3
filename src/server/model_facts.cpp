#include "server/model_facts.h"

#include <sodium.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "gguf/reader.h"

namespace herd::server {
namespace {

nlohmann::json metadata_value(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64:
      return v.u;
    case ValueType::BOOL:
      return v.u != 0;
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return v.i;
    case ValueType::F32:
    case ValueType::F64:
      return v.f;
    case ValueType::STRING:
      return std::string(v.str);
    case ValueType::ARRAY:
      break;
  }
  return nullptr;  // arrays (the vocabulary) are left out, as Ollama's /api/show leaves them
}

}  // namespace

std::string file_type_name(uint64_t file_type) {
  // llama_ftype, as llama.cpp and Ollama name them.
  static constexpr const char* kNames[] = {
      "F32",    "F16",    "Q4_0",  "Q4_1",    nullptr,  nullptr,  nullptr,  "Q8_0",
      "Q5_0",   "Q5_1",   "Q2_K",  "Q3_K_S",  "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
      "Q5_K_S", "Q5_K_M", "Q6_K",  "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS",
      "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS", "IQ1_M",
      "BF16",   nullptr,  nullptr, nullptr,   "TQ1_0",  "TQ2_0",  "MXFP4",
  };
  if (file_type < std::size(kNames) && kNames[file_type] != nullptr) return kNames[file_type];
  return "unknown";
}

std::string parameter_size(int64_t parameters) {
  char text[32];
  const double n = static_cast<double>(parameters);
  if (n >= 1e9) {
    std::snprintf(text, sizeof text, "%.1fB", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(text, sizeof text, "%.2fM", n / 1e6);
  } else if (n >= 1e3) {
    std::snprintf(text, sizeof text, "%.2fK", n / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(parameters));
  }
  return text;
}

ModelFacts read_model_facts(const gguf::File& file) {
  ModelFacts f;
  f.family = std::string(file.get_string_or("general.architecture").value_or("unknown"));
  for (const gguf::TensorInfo& t : file.tensors()) f.parameters += t.n_elements;
  // An integer of any width: a signed one is in `i`, an unsigned one in `u`.
  const gguf::Value* type = file.find("general.file_type");
  f.quantization = "unknown";
  if (type != nullptr && type->is_integer() && type->i >= 0) {
    f.quantization = file_type_name(type->u + static_cast<uint64_t>(type->i));
  }
  f.metadata = nlohmann::json::object();
  for (const auto& [key, value] : file.metadata())
    f.metadata[std::string(key)] = metadata_value(value);
  // A split model is all of its files: their sizes summed, the newest one's time.
  for (const std::string& part : file.paths()) {
    struct stat st {};
    if (::stat(part.c_str(), &st) == 0) {
      f.size_bytes += static_cast<uint64_t>(st.st_size);
      f.modified_unix = std::max(f.modified_unix, static_cast<int64_t>(st.st_mtime));
    }
  }
  // The headers name the model (its metadata, vocabulary and tensor table) without reading
  // gigabytes of weights; a digest of the whole file would take as long as reading it. A
  // split model's digest covers every file's header, in order.
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  for (size_t i = 0; i < file.n_files(); ++i) {
    const std::span<const uint8_t> header = file.file_header(i);
    crypto_hash_sha256_update(&state, header.data(), header.size());
  }
  unsigned char hash[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state, hash);
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char b : hash) {
    f.digest += kHex[b >> 4];
    f.digest += kHex[b & 15];
  }
  return f;
}

}  // namespace herd::server
