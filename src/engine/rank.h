// Rank: what runs one part of a model on one machine. Its shard (on the CPU or a device), the
// thread pool its kernels use, and, where the part is placed over a GPU and the CPU
// (device_placement.h), the CPU's share of it: the routed experts (an expert-parallel pair in
// this process, cpu_experts.h) or the later layers and the head (a pipeline of two stages in
// this process). The local runner is one rank over the whole model; a pod node's loaded part
// is one rank of its plan.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/all_reduce.h"
#include "engine/batch.h"
#include "engine/cpu_experts.h"
#include "engine/device_placement.h"
#include "engine/shard.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/thread_pool.h"

namespace herd::engine {

class Rank {
 public:
  // Loads the part `spec` of the model in `file` (which must outlive the rank) with `options`
  // (options.device: where it runs; n_threads: the size of the rank's pool). On a device, the
  // part sits as `placement` says: kDevice, all of it; kExpertsOnCpu, the routed experts on
  // the CPU; kFirstLayers, its first device_layers layers (counted from spec.layer_begin) on
  // the device and the rest (with the head, where the part has it) on the CPU. Only kDevice
  // is allowed on the CPU and for a tensor-parallel rank's slice (a slice runs on one device).
  // Throws herd::Error naming the problem (a contradictory placement, what Shard::load throws).
  static std::unique_ptr<Rank> open(const gguf::File& file, const ModelInfo& info,
                                    const ShardSpec& spec, const ShardOptions& options,
                                    const DevicePlacement& placement);
  ~Rank();
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  // The part's forward pass, as Shard::forward: input [n][n_embd] activations from the
  // previous stage (null where the part embeds); output logits or activations. all_reduce:
  // for a tensor-parallel rank, whose part is whole on one device or the CPU (a part over a
  // GPU and the CPU takes none: herd::Error).
  void forward(const Batch& batch, const float* input, std::vector<float>& output,
               AllReduce* all_reduce = nullptr);

  // The shard of the device (or of the CPU when the part runs there): the first layers, or all
  // of the part but its routed experts, or all of it.
  const Shard& shard() const { return shard_; }
  Shard& shard() { return shard_; }
  ThreadPool& pool() { return pool_; }
  DevicePlacement::Kind placement() const { return placement_; }
  const CpuExperts* cpu_experts() const { return experts_.get(); }
  // The later layers on the CPU after a device stage of the first ones, or null.
  const Shard* cpu_stage() const { return cpu_stage_ ? &*cpu_stage_ : nullptr; }
  // How the part runs, for timing summaries and logs: "2 threads, avx512 kernels",
  // "<device>; routed experts on the CPU (...)", ...
  std::string describe(kernels::Isa isa) const;

 private:
  Rank(Shard shard, int threads);

  Shard shard_;
  ThreadPool pool_;
  DevicePlacement::Kind placement_ = DevicePlacement::kDevice;
  std::unique_ptr<CpuExperts> experts_;  // the routed experts on the CPU, beside a device shard
  // The later layers and the head on the CPU, after a device shard of the first layers.
  std::optional<Shard> cpu_stage_;
  std::vector<float> between_;  // [n][n_embd] activations from the device stage to the CPU one
};

// Rank::open on options.device; when `fall_back` (the user's --device auto), a device that
// cannot take the part (memory, a weight type without a shader) leaves the whole part on the
// CPU, and *note (when given) says why. Throws what Rank::open throws otherwise.
std::unique_ptr<Rank> open_rank(const gguf::File& file, const ModelInfo& info,
                                const ShardSpec& spec, ShardOptions options,
                                const DevicePlacement& placement, bool fall_back,
                                std::string* note);

}  // namespace herd::engine
