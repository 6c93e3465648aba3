#include "model/file_type.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace herd {
namespace {

// clang-format off
constexpr FileType kFileTypes[] = {
  // name     general.file_type  base type          k_mix
  {"f32",     0,                 TensorType::F32,   false},
  {"f16",     1,                 TensorType::F16,   false},
  {"q4_0",    2,                 TensorType::Q4_0,  false},
  {"q4_1",    3,                 TensorType::Q4_1,  false},
  {"q8_0",    7,                 TensorType::Q8_0,  false},
  {"q5_0",    8,                 TensorType::Q5_0,  false},
  {"q5_1",    9,                 TensorType::Q5_1,  false},
  {"q4_k_m",  15,                TensorType::Q4_K,  true},
  {"q5_k_m",  17,                TensorType::Q5_K,  true},
  {"q6_k",    18,                TensorType::Q6_K,  false},
  {"bf16",    32,                TensorType::BF16,  false},
  {"iq4_nl",  25,                TensorType::IQ4_NL, false},
  {"iq4_xs",  30,                TensorType::IQ4_XS, false},
};
// clang-format on

// llama.cpp's rule for which layers of a *_K_M mix get more bits: the first and last
// eighth of the layers and every third layer between them.
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// A type whose block size divides a row of n elements: K-quants need 256, the legacy
// quants 32. Fallbacks follow llama.cpp (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0).
TensorType fit_row(TensorType type, int64_t n) {
  if (n % type_traits(type).block_size == 0) return type;
  switch (type) {
    case TensorType::Q4_K:
      type = TensorType::Q5_0;
      break;
    case TensorType::Q5_K:
      type = TensorType::Q5_1;
      break;
    case TensorType::Q6_K:
      type = TensorType::Q8_0;
      break;
    case TensorType::IQ4_XS:  // llama.cpp's fallback: the same levels per 32 values
      type = TensorType::IQ4_NL;
      break;
    default:
      break;
  }
  return n % type_traits(type).block_size == 0 ? type : TensorType::F16;
}

}  // namespace

std::optional<FileType> find_file_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const FileType& ft : kFileTypes) {
    if (ft.name == lower) return ft;
  }
  return std::nullopt;
}

std::vector<std::string_view> file_type_names() {
  std::vector<std::string_view> names;
  for (const FileType& ft : kFileTypes) names.push_back(ft.name);
  return names;
}

TensorType tensor_type_for(const FileType& ft, const TensorSpec& t, const HParams& hp) {
  // Biases stay F32 also when 2-D (gpt-oss's per-expert [rows, n_expert] biases), and so
  // does the router, which llama-quantize never quantizes.
  if (t.weight == LayerWeight::kHashExperts) return TensorType::I32;  // expert ids
  if (t.shape.size() == 1 || t.role == TensorRole::kRouter || t.role == TensorRole::kBias) {
    return TensorType::F32;
  }
  TensorType type = ft.base;
  if (ft.k_mix) {
    switch (t.role) {
      case TensorRole::kOutput:
        type = TensorType::Q6_K;
        break;
      case TensorRole::kEmbedding:  // a tied embedding is also the output matrix
        if (hp.tied_output) type = TensorType::Q6_K;
        break;
      case TensorRole::kAttentionValue:
      case TensorRole::kFfnDown:
      case TensorRole::kExpertsDown:
        if (use_more_bits(t.layer, hp.n_layer)) type = TensorType::Q6_K;
        break;
      default:
        break;
    }
  }
  return fit_row(type, t.shape[0]);
}

}  // namespace herd
