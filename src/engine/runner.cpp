#include "engine/runner.h"

#include <algorithm>
#include <optional>

#include "engine/backend.h"
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

namespace {

// How many of the model's first layers fit in `bytes` beside the embedding (the device stage
// holds it; the head stays on the CPU): the layers' tensors summed in order. At least 1.
int64_t layers_that_fit(const ModelInfo& info, const gguf::File& file, uint64_t bytes) {
  std::vector<uint64_t> per_layer(static_cast<size_t>(info.hp.n_layer), 0);
  uint64_t used = 0;
  for (const TensorSpec& t : info.tensors) {
    const gguf::TensorInfo* in_file = file.find_tensor(t.name);
    const uint64_t size = in_file != nullptr ? in_file->n_bytes : 0;
    if (t.layer >= 0 && t.layer < info.hp.n_layer) {
      per_layer[static_cast<size_t>(t.layer)] += size;
    } else if (t.role == TensorRole::kEmbedding) {
      used += size;
    }
  }
  int64_t n = 0;
  while (n < info.hp.n_layer && used + per_layer[static_cast<size_t>(n)] <= bytes) {
    used += per_layer[static_cast<size_t>(n)];
    ++n;
  }
  return std::max<int64_t>(1, n);
}

}  // namespace

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
  if (options.experts != "auto" && options.experts != "cpu" && options.experts != "device") {
    throw Error("engine", "--experts '" + options.experts + "': expected auto, cpu or device");
  }
  // The device's memory (0 on the CPU), read once: it decides the placements below.
  const uint64_t device_bytes = device_memory_bytes(shard_options.device);
  // The routed experts on the CPU: asked for, or an MoE model larger than the device holds.
  bool experts_on_cpu = false;
  if (shard_options.device.kind != Device::kCpu && info.hp.n_expert > 0) {
    experts_on_cpu = options.experts == "cpu" || (options.experts == "auto" && device_bytes > 0 &&
                                                  info.weight_bytes > device_bytes / 10 * 9);
    if (experts_on_cpu && options.experts == "auto") {
      note = "the model (" + std::to_string(info.weight_bytes >> 20) + " MiB) outgrows " +
             device_name(shard_options.device) + " (" + std::to_string(device_bytes >> 20) +
             " MiB): the routed experts stay on the CPU";
    }
  } else if (options.experts == "cpu") {
    throw Error("engine",
                "--experts cpu keeps an MoE model's experts on the CPU beside a GPU: " +
                    std::string(info.hp.n_expert > 0 ? "no GPU device is chosen (--device)"
                                                     : "the model has no experts"));
  }
  // A dense model larger than the device: its first layers there, the rest on the CPU.
  int64_t device_layers = options.device_layers;
  if (shard_options.device.kind != Device::kCpu && device_layers < 0 && !experts_on_cpu) {
    if (device_bytes > 0 && info.weight_bytes > device_bytes / 10 * 9) {
      device_layers = layers_that_fit(info, file, device_bytes / 10 * 9);
      note = "the model (" + std::to_string(info.weight_bytes >> 20) + " MiB) outgrows " +
             device_name(shard_options.device) + " (" + std::to_string(device_bytes >> 20) +
             " MiB): its first " + std::to_string(device_layers) + " of " +
             std::to_string(info.hp.n_layer) + " layers run there, the rest on the CPU";
    }
  }
  if (device_layers >= 0 && shard_options.device.kind == Device::kCpu) {
    throw Error("engine", "--device-layers needs a GPU device (--device)");
  }
  if (device_layers >= 0 && experts_on_cpu) {
    throw Error("engine", "--device-layers and --experts cpu are two placements: choose one");
  }
  if (device_layers >= info.hp.n_layer) device_layers = -1;  // all of them: one stage
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
