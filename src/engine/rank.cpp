#include "engine/rank.h"

#include "util/error.h"

namespace herd::engine {

Rank::Rank(Shard shard, int threads) : shard_(std::move(shard)), pool_(threads) {}

Rank::~Rank() = default;

std::unique_ptr<Rank> Rank::open(const gguf::File& file, const ModelInfo& info,
                                 const ShardSpec& spec, const ShardOptions& options,
                                 const DevicePlacement& placement) {
  const bool split = placement.kind != DevicePlacement::kDevice;
  if (split && options.device.kind == Device::kCpu) {
    throw Error("engine", "a part placed over a GPU and the CPU needs a GPU device");
  }
  if (split && !(spec.slice == TensorSlice{})) {
    throw Error("engine",
                "a tensor-parallel rank's slice runs on one device: it is not split over a GPU "
                "and the CPU");
  }
  const int64_t end = spec.layer_end < 0 ? info.hp.n_layer : spec.layer_end;
  const int64_t n_layers = end - spec.layer_begin;
  if (placement.kind == DevicePlacement::kFirstLayers &&
      (placement.device_layers < 1 || placement.device_layers >= n_layers)) {
    throw Error("engine", "the first " + std::to_string(placement.device_layers) +
                              " layers on the device: the part has " + std::to_string(n_layers) +
                              " (1 to " + std::to_string(n_layers - 1) + " leave the CPU some)");
  }
  ShardSpec device_spec = spec;
  if (placement.kind == DevicePlacement::kExpertsOnCpu) {
    device_spec.slice = device_slice_without_experts();
  }
  if (placement.kind == DevicePlacement::kFirstLayers) {
    device_spec.layer_end = spec.layer_begin + placement.device_layers;
    device_spec.output = false;
  }
  auto rank = std::unique_ptr<Rank>(
      new Rank(Shard::load(file, info, device_spec, options), options.n_threads));
  rank->placement_ = placement.kind;
  if (!split) return rank;
  // Beside the device shard, the CPU's part: the later layers, or the routed experts.
  ShardOptions cpu = options;
  cpu.device = Device{};
  if (placement.kind == DevicePlacement::kFirstLayers) {
    ShardSpec rest = spec;
    rest.layer_begin = device_spec.layer_end;
    rest.layer_end = end;
    rest.embedding = false;
    rank->cpu_stage_.emplace(Shard::load(file, info, rest, cpu));
  } else {
    // Every routed expert of the part's layers; it embeds the tokens itself (or reads the
    // same input as the device) and computes no logits (its slice has no vocabulary).
    ShardSpec experts_spec = spec;
    experts_spec.slice = cpu_slice_of_experts();
    rank->experts_ =
        std::make_unique<CpuExperts>(Shard::load(file, info, experts_spec, cpu), rank->pool_);
  }
  return rank;
}

std::string Rank::describe(kernels::Isa isa) const {
  const std::string cpu = std::to_string(pool_.size()) + " threads, " +
                          std::string(kernels::isa_name(isa)) + " kernels";
  if (cpu_stage_) {
    return shard_.device() + ": layers " + std::to_string(shard_.spec().layer_begin) + "-" +
           std::to_string(shard_.spec().layer_end - 1) + "; the rest on the CPU (" + cpu + ")";
  }
  if (experts_ != nullptr) return shard_.device() + "; routed experts on the CPU (" + cpu + ")";
  if (shard_.device() != "cpu") return shard_.device();
  return cpu;
}

void Rank::forward(const Batch& batch, const float* input, std::vector<float>& output,
                   AllReduce* all_reduce) {
  if (all_reduce != nullptr && placement_ != DevicePlacement::kDevice) {
    throw Error("engine",
                "a part over a GPU and the CPU takes no tensor-parallel all-reduce: a "
                "tensor-parallel rank runs on one device");
  }
  if (experts_ != nullptr) {
    experts_->forward(shard_, batch, input, output, pool_);
    return;
  }
  if (cpu_stage_) {  // the device's layers, then the CPU's
    shard_.forward(batch, input, between_, pool_);
    cpu_stage_->forward(batch, between_.data(), output, pool_);
    return;
  }
  shard_.forward(batch, input, output, pool_, all_reduce);
}

std::unique_ptr<Rank> open_rank(const gguf::File& file, const ModelInfo& info,
                                const ShardSpec& spec, ShardOptions options,
                                const DevicePlacement& placement, bool fall_back,
                                std::string* note) {
  try {
    return Rank::open(file, info, spec, options, placement);
  } catch (const Error& e) {
    if (!fall_back || options.device.kind == Device::kCpu) throw;
    if (note != nullptr) {
      *note = device_name(options.device) + " could not take the part (" + e.what() +
              "): running on the CPU";
    }
    options.device = Device{};
    return Rank::open(file, info, spec, options, DevicePlacement{});
  }
}

}  // namespace herd::engine
