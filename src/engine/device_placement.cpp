#include "engine/device_placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/shard.h"
#include "util/error.h"

namespace herd::engine {

uint64_t PartBytes::total() const {
  uint64_t sum = embedding + head;
  for (size_t i = 0; i < layers.size(); ++i) sum += layers[i] + caches[i];
  return sum;
}

PartBytes part_bytes(const ModelInfo& info, const gguf::File& file, int64_t layer_begin,
                     int64_t layer_end, bool embedding, bool output, int64_t n_ctx, int64_t n_seq) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(0, layer_end - layer_begin));
  PartBytes part;
  part.layers.assign(n, 0);
  part.experts.assign(n, 0);
  part.caches.assign(n, 0);
  for (const TensorSpec& t : info.tensors) {
    const gguf::TensorInfo* in_file = file.find_tensor(t.name);
    const uint64_t size = in_file != nullptr ? in_file->n_bytes : 0;
    if (t.layer >= layer_begin && t.layer < layer_end) {
      const size_t i = static_cast<size_t>(t.layer - layer_begin);
      part.layers[i] += size;
      if (t.per_expert) part.experts[i] += size;
    } else if (t.layer < 0 && t.role == TensorRole::kEmbedding) {
      if (embedding) part.embedding += size;
      // A tied head reads token_embd: the head's part holds it too.
      if (output && info.hp.tied_output) part.head += size;
    } else if (t.layer < 0 && output) {
      part.head += size;
    }
  }
  // Each layer's cache, from the shard's own sizes of one layer's shard.
  ShardOptions options;
  options.n_ctx = n_ctx;
  options.n_seq = n_seq;
  for (size_t i = 0; i < n; ++i) {
    ShardSpec one;
    one.layer_begin = layer_begin + int64_t(i);
    one.layer_end = one.layer_begin + 1;
    one.embedding = false;
    one.output = false;
    part.caches[i] = Shard::sizes(info, one, options).kv_bytes;
  }
  return part;
}

ExpertsChoice parse_experts_choice(const std::string& text) {
  if (text == "auto") return ExpertsChoice::kAuto;
  if (text == "cpu") return ExpertsChoice::kCpu;
  if (text == "device") return ExpertsChoice::kDevice;
  throw Error("engine", "--experts '" + text + "': expected auto, cpu or device");
}

namespace {

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

DevicePlacement place_on_device(const PartBytes& part, uint64_t device_memory, double headroom,
                                ExpertsChoice experts, int64_t forced_layers,
                                const std::string& device_name) {
  const int64_t n = static_cast<int64_t>(part.layers.size());
  const uint64_t expert_bytes =
      std::accumulate(part.experts.begin(), part.experts.end(), uint64_t{0});
  const uint64_t total = part.total();
  const uint64_t room = static_cast<uint64_t>(
      std::floor(static_cast<double>(device_memory) * std::clamp(headroom, 0.0, 1.0)));
  if (experts == ExpertsChoice::kCpu && forced_layers >= 0) {
    throw Error("engine", "--device-layers and --experts cpu are two placements: choose one");
  }
  if (experts == ExpertsChoice::kCpu && expert_bytes == 0) {
    throw Error("engine",
                "--experts cpu keeps an MoE model's routed experts on the CPU beside a GPU: the "
                "model has no experts");
  }
  DevicePlacement p;
  auto experts_on_cpu = [&](const std::string& why) {
    p.kind = DevicePlacement::kExpertsOnCpu;
    p.device_bytes = total - expert_bytes;
    p.cpu_bytes = expert_bytes;
    p.why = why;
    return p;
  };
  // The first k layers (with the embedding) on the device, the rest and the head on the CPU.
  auto first_layers = [&](int64_t k, const std::string& why) {
    if (k >= n) {
      p.kind = DevicePlacement::kDevice;
      p.device_bytes = total;
      p.why = why;
      return p;
    }
    p.kind = DevicePlacement::kFirstLayers;
    p.device_layers = k;
    p.device_bytes = part.embedding;
    for (int64_t i = 0; i < k; ++i) {
      p.device_bytes += part.layers[size_t(i)] + part.caches[size_t(i)];
    }
    p.cpu_bytes = total - p.device_bytes;
    p.why = why;
    return p;
  };
  const std::string sizes = "the part (" + mib(total) + " with its cache) and " + device_name +
                            " (" + mib(device_memory) + ", " +
                            std::to_string(int(std::lround(headroom * 100))) + "% usable)";
  if (experts == ExpertsChoice::kCpu) {
    return experts_on_cpu("--experts cpu: the routed experts (" + mib(expert_bytes) +
                          ") on the CPU, the rest on " + device_name);
  }
  if (forced_layers >= 0) {
    return first_layers(std::max<int64_t>(1, forced_layers),
                        "--device-layers " + std::to_string(forced_layers) + ": the first " +
                            std::to_string(std::min(forced_layers, n)) + " of " +
                            std::to_string(n) + " layers on " + device_name);
  }
  if (device_memory == 0 || total <= room) {
    p.kind = DevicePlacement::kDevice;
    p.device_bytes = total;
    p.why = device_memory == 0 ? "all on " + device_name + " (its memory could not be read)"
                               : "all on " + device_name + ": it holds " + sizes;
    return p;
  }
  if (expert_bytes > 0 && experts == ExpertsChoice::kAuto && total - expert_bytes <= room) {
    return experts_on_cpu(sizes + ": the part outgrows the device; without its routed experts (" +
                          mib(expert_bytes) + ", on the CPU) it fits");
  }
  int64_t k = 0;
  uint64_t used = part.embedding;
  while (k < n && used + part.layers[size_t(k)] + part.caches[size_t(k)] <= room) {
    used += part.layers[size_t(k)] + part.caches[size_t(k)];
    ++k;
  }
  return first_layers(
      std::max<int64_t>(1, k),
      sizes + ": the part outgrows the device" +
          (expert_bytes > 0 && experts == ExpertsChoice::kAuto ? " even without its routed experts"
                                                               : "") +
          "; its first " + std::to_string(std::max<int64_t>(1, k)) + " of " + std::to_string(n) +
          " layers fit there, the rest run on the CPU");
}

}  // namespace herd::engine
