// What a GGUF file says about the model in it: architecture row, hyper-parameters and the
// tensors it must hold, checked against each other before anything is loaded.
#pragma once

#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/arch.h"
#include "model/tensor_slice.h"

namespace herd {

struct ModelInfo {
  const ArchSpec* arch = nullptr;
  HParams hp;
  std::vector<TensorSpec> tensors;  // every weight the forward pass reads, in file order
  bool has_rope_freqs = false;      // rope_freqs.weight: per-pair frequency divisors
  uint64_t weight_bytes = 0;        // bytes of all tensors in `tensors`
  // The slice the file's tensors hold when they are a tensor-parallel rank's cut (a node's
  // cache file, herd.slice.* metadata); nullopt: whole tensors. `tensors` keeps the model's
  // whole shapes either way.
  std::optional<TensorSlice> file_slice;
};

// Reads and checks the hyper-parameters and the tensor table. Throws herd::Error
// ("[model] ...") naming the key or tensor when the file is not a model herd can run:
// unknown architecture, a missing or inconsistent hyper-parameter, a missing tensor or
// one whose shape disagrees with the hyper-parameters.
//
// partial: the file holds only some of the model's tensors (a node's cached shard): those
// present are checked, missing ones are left out of `tensors`, and n_vocab is 0 unless
// token_embd or output is present (only a shard with the embedding or head needs it).
// A file that records a slice (read_slice_metadata) must hold each tensor cut by it.
ModelInfo read_model_info(const gguf::File& file, bool partial = false);

// The MTP head's view of a model with NextN blocks (hp.n_nextn > 0): the same file, its
// NextN blocks counted in n_layer and bound as ordinary layers (hp.n_nextn_run of them, the
// last), so that a Shard of layers [n_layer, n_layer + n_nextn) runs them (engine/mtp_head.h).
// Throws herd::Error when the model has none.
ModelInfo mtp_model_info(const ModelInfo& info);

// The spec of the weight `name`, or nullptr when the model has none of that name.
const TensorSpec* find_tensor_spec(const ModelInfo& info, std::string_view name);

}  // namespace herd
