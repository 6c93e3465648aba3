// What a GGUF file says about the model in it: architecture row, hyper-parameters and the
// tensors it must hold, checked against each other before anything is loaded.
#pragma once

#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/arch.h"

namespace herd {

struct ModelInfo {
  const ArchSpec* arch = nullptr;
  HParams hp;
  std::vector<TensorSpec> tensors;  // every weight the forward pass reads, in file order
  bool has_rope_freqs = false;      // rope_freqs.weight: per-pair frequency divisors
  uint64_t weight_bytes = 0;        // bytes of all tensors in `tensors`
};

// Reads and checks the hyper-parameters and the tensor table. Throws herd::Error
// ("[model] ...") naming the key or tensor when the file is not a model herd can run:
// unknown architecture, a missing or inconsistent hyper-parameter, a missing tensor or
// one whose shape disagrees with the hyper-parameters.
ModelInfo read_model_info(const gguf::File& file);

}  // namespace herd
