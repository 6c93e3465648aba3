#include "engine/runner.h"

#include <algorithm>
#include <optional>

#include "engine/backend.h"
#include "engine/device_placement.h"
#include "util/cpu_info.h"
#include "util/error.h"

namespace herd::engine {

LocalRunner::LocalRunner(gguf::File file, ModelInfo info, Shard shard, int threads,
                         kernels::Isa isa)
    : file_(std::move(file)),
      info_(std::move(info)),
      shard_(std::move(shard)),
      pool_(threads),
      isa_(isa) {}

std::unique_ptr<LocalRunner> LocalRunner::open(const std::string& path,
                                               const LocalOptions& options) {
  gguf::File file = gguf::File::open(path);
  ModelInfo info = read_model_info(file);
  ShardOptions shard_options;
  shard_options.n_ctx = options.n_ctx > 0 ? std::min(options.n_ctx, info.hp.n_ctx)
                                          : std::min(info.hp.n_ctx, kDefaultMaxCtx);
  shard_options.n_seq = options.n_seq;
  shard_options.mla_decompress_min_tokens = options.mla_decompress_min_tokens;
  shard_options.isa = kernels::best_isa(kernels::detect_cpu(), options.isa_limit);
  shard_options.n_threads = options.threads > 0 ? options.threads : default_thread_count();
  shard_options.upload_progress = options.upload_progress;
  // The shard points into the file's mapping, which moves with the File object unchanged.
  std::string note;
  shard_options.device = choose_device(options.device, *info.arch, info.hp, &note);
  const ExpertsChoice experts_choice = parse_experts_choice(options.experts);
  bool experts_on_cpu = false;
  int64_t device_layers = -1;
  if (shard_options.device.kind == Device::kCpu) {
    if (experts_choice == ExpertsChoice::kCpu) {
      throw Error("engine",
                  "--experts cpu keeps an MoE model's experts on the CPU beside a GPU: no GPU "
                  "device is chosen (--device)");
    }
    if (options.device_layers >= 0) {
      throw Error("engine", "--device-layers needs a GPU device (--device)");
    }
  } else {
    // The placement the planner would make (device_placement.h), from the device's memory.
    const PartBytes part = part_bytes(info, file, 0, info.hp.n_layer, true, true,
                                      shard_options.n_ctx, shard_options.n_seq);
    const DevicePlacement placement =
        place_on_device(part, device_memory_bytes(shard_options.device), kDeviceHeadroom,
                        experts_choice, options.device_layers, device_name(shard_options.device));
    experts_on_cpu = placement.kind == DevicePlacement::kExpertsOnCpu;
    if (placement.kind == DevicePlacement::kFirstLayers) device_layers = placement.device_layers;
    // Said when the placement was the runner's choice, not the user's.
    if (placement.kind != DevicePlacement::kDevice && experts_choice == ExpertsChoice::kAuto &&
        options.device_layers < 0) {
      note = placement.why;
    }
  }
  ShardSpec spec;
  if (experts_on_cpu) spec.slice = device_slice_without_experts();
  if (device_layers >= 0) {
    spec.layer_end = device_layers;
    spec.output = false;
  }
  std::optional<Shard> shard;
  try {
    shard.emplace(Shard::load(file, info, spec, shard_options));
  } catch (const Error& e) {
    // auto: a GPU that fails (memory, a weight type without a shader) leaves the CPU.
    if (options.device != "auto" || shard_options.device.kind == Device::kCpu) throw;
    note = device_name(shard_options.device) + " could not take the model (" + e.what() +
           "): running on the CPU";
    shard_options.device = Device{};
    experts_on_cpu = false;
    device_layers = -1;
    shard.emplace(Shard::load(file, info, ShardSpec{}, shard_options));
  }
  // Beside a device shard, the CPU's part: the later layers, or the routed experts.
  ShardOptions cpu = shard_options;
  cpu.device = Device{};
  std::optional<Shard> cpu_stage;
  if (device_layers >= 0 && shard_options.device.kind != Device::kCpu) {
    ShardSpec rest;
    rest.layer_begin = device_layers;
    rest.embedding = false;
    cpu_stage.emplace(Shard::load(file, info, rest, cpu));
  }
  std::optional<Shard> experts;
  if (experts_on_cpu) {
    ShardSpec experts_spec;
    experts_spec.slice = cpu_slice_of_experts();
    experts.emplace(Shard::load(file, info, experts_spec, cpu));
  }
  auto runner = std::unique_ptr<LocalRunner>(new LocalRunner(
      std::move(file), std::move(info), std::move(*shard), options.threads, shard_options.isa));
  runner->device_note_ = std::move(note);
  if (experts) runner->experts_ = std::make_unique<CpuExperts>(std::move(*experts), runner->pool_);
  if (cpu_stage) runner->cpu_stage_.emplace(std::move(*cpu_stage));
  return runner;
}

std::string LocalRunner::describe() const {
  if (cpu_stage_) {
    return shard_.device() + ": layers 0-" + std::to_string(shard_.spec().layer_end - 1) +
           "; the rest on the CPU (" + std::to_string(pool_.size()) + " threads, " +
           std::string(kernels::isa_name(isa_)) + " kernels)";
  }
  if (experts_ != nullptr) {
    return shard_.device() + "; routed experts on the CPU (" + std::to_string(pool_.size()) +
           " threads, " + std::string(kernels::isa_name(isa_)) + " kernels)";
  }
  if (shard_.device() != "cpu") return shard_.device();
  return std::to_string(pool_.size()) + " threads, " + std::string(kernels::isa_name(isa_)) +
         " kernels";
}

void LocalRunner::forward(const Batch& batch, std::vector<float>& logits) {
  if (experts_ != nullptr) {
    experts_->forward(shard_, batch, logits, pool_);
    return;
  }
  if (cpu_stage_) {  // the device's layers, then the CPU's
    shard_.forward(batch, nullptr, between_, pool_);
    cpu_stage_->forward(batch, between_.data(), logits, pool_);
    return;
  }
  shard_.forward(batch, nullptr, logits, pool_);
}

void LocalRunner::save_state(int32_t seq, int64_t pos) {
  if (!shard_.has_recurrent_state() || pos <= 0) return;
  snapshots_.resize(static_cast<size_t>(shard_.n_seq()));
  auto& mine = snapshots_.at(static_cast<size_t>(seq));
  std::erase_if(mine, [&](const RecurrentSnapshot& s) { return s.pos == pos; });
  if (mine.size() == kSnapshotsPerSlot) mine.erase(mine.begin());
  mine.push_back(shard_.snapshot_state(seq));
  HERD_CHECK(mine.back().pos == pos);
}

int64_t LocalRunner::restore_state(int32_t seq, int64_t at_most) {
  if (static_cast<size_t>(seq) >= snapshots_.size()) return 0;
  auto& mine = snapshots_[static_cast<size_t>(seq)];
  std::erase_if(mine, [&](const RecurrentSnapshot& s) { return s.pos > at_most; });
  const auto best = std::max_element(
      mine.begin(), mine.end(),
      [](const RecurrentSnapshot& a, const RecurrentSnapshot& b) { return a.pos < b.pos; });
  if (best == mine.end()) return 0;
  shard_.restore_state(seq, *best);
  return best->pos;
}

}  // namespace herd::engine
