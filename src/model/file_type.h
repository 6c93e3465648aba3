// File types ("mixes"): which tensor type each weight of a model gets. A mix is a row of a
// table; the per-tensor rule (e.g. Q4_K_M's Q6_K for some attn_v and ffn_down layers) is
// the same code `herd synth` and a future `herd quantize` use.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "model/arch.h"
#include "quant/types.h"

namespace herd {

struct FileType {
  std::string_view name;  // "q4_k_m", as on the command line
  uint32_t gguf_id;       // general.file_type (llama_ftype)
  TensorType base;        // type of most 2-D weights
  bool k_mix;             // apply the *_K_M rules (more bits for some layers)
};

// The row for a name (case-insensitive), or nullopt.
std::optional<FileType> find_file_type(std::string_view name);
std::vector<std::string_view> file_type_names();

// The type a tensor gets in this mix. 1-D tensors (norms, biases), 2-D biases and the MoE
// router stay F32; a type whose block does not divide the row falls back to one that does
// (e.g. MLA's attn_k_b, whose rows are the nope part of a key).
TensorType tensor_type_for(const FileType& ft, const TensorSpec& t, const HParams& hp);

}  // namespace herd
