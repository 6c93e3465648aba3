// Where a model's part goes on a machine with a GPU: the plans herd already has, inside one
// machine. The part runs on the device when it fits; an MoE part that does not keeps its
// routed experts on the CPU (an expert-parallel stage of two ranks: cpu_experts.h) when the
// rest fits; a part that still does not fits its first layers on the device and runs the
// others on the CPU (a pipeline of two stages). One pure function, for the local runner
// and the planner alike (herd plan --explain prints its reasons).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/model_info.h"

namespace herd::engine {

// What the placement weighs of a part of a model (a layer range, with or without the
// embedding and the output head), in bytes it would hold.
struct PartBytes {
  std::vector<uint64_t> layers;   // [n] each layer's weights, routed experts included
  std::vector<uint64_t> experts;  // [n] of them, the routed experts' (0: a dense layer)
  std::vector<uint64_t> caches;   // [n] its KV cache or recurrent state for every slot
  uint64_t embedding = 0;         // token_embd, where the part embeds
  uint64_t head = 0;              // output norm and head, where the part has them
  uint64_t total() const;
};

// The bytes of layers [layer_begin, layer_end) of a model's file, whole (not sliced), with a
// cache of n_ctx positions for n_seq slots.
PartBytes part_bytes(const ModelInfo& info, const gguf::File& file, int64_t layer_begin,
                     int64_t layer_end, bool embedding, bool output, int64_t n_ctx, int64_t n_seq);

// The share of a device's memory a placement fills: the rest is the driver's, the
// activations' and other programs'.
constexpr double kDeviceHeadroom = 0.9;

enum class ExpertsChoice { kAuto, kCpu, kDevice };
ExpertsChoice parse_experts_choice(const std::string& text);  // auto, cpu, device; throws

struct DevicePlacement {
  enum Kind {
    kDevice,        // the whole part on the device
    kExpertsOnCpu,  // the routed experts on the CPU, the rest on the device
    kFirstLayers,  // the first device_layers layers on the device, the rest and the head on the CPU
  };
  Kind kind = kDevice;
  int64_t device_layers = 0;  // kFirstLayers: of the part's layers, counted from its first
  uint64_t device_bytes = 0;  // estimated: what the device holds, and the CPU beside it
  uint64_t cpu_bytes = 0;
  std::string why;  // a sentence for `herd plan --explain` and the runner's note
};

// The placement of `part` on a device of `device_memory` bytes (of which `headroom` may be
// used), as `experts` and `forced_layers` (>= 0: --device-layers N) ask. Throws
// herd::Error("engine", ...) for a contradiction: --experts cpu on a dense part, both forced.
DevicePlacement place_on_device(const PartBytes& part, uint64_t device_memory, double headroom,
                                ExpertsChoice experts, int64_t forced_layers,
                                const std::string& device_name);

}  // namespace herd::engine
