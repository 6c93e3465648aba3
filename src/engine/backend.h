// Where a shard's forward pass runs. On the CPU it is the shard's own code (shard*.cpp: the
// kernels called at once, on the shard's thread pool). On a device, a DeviceBackend holds the
// shard's weights, KV cache and activations in device memory, records each forward (one
// decode step, one prefill chunk) as one submission, and brings back only the logits (or a
// pipeline stage's activations). The shard keeps what is the same on every backend: the
// model's shape, its layers' options, the batch's checks (docs/backends.md, "The engine on a
// device").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/all_reduce.h"
#include "engine/batch.h"
#include "engine/device.h"
#include "engine/shard.h"

namespace herd::engine {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Shard::forward's contract (shard.h), the batch already checked by the shard; all_reduce:
  // the stage's, for a tensor-parallel slice (null: a whole shard).
  virtual void forward(const Batch& batch, const float* input, std::vector<float>& output,
                       AllReduce* all_reduce) = 0;
  // "vulkan:0 NVIDIA GeForce RTX 4090 (discrete)"
  virtual std::string describe() const = 0;
  // Device memory held: weights, cache, activations.
  virtual size_t device_bytes() const = 0;
  // Slot `seq`'s recurrent states (Gated DeltaNet layers' conv and delta states) as
  // RecurrentSnapshot::rows lays them out, [recurrent layers][RecurrentShape::floats()]
  // (none: empty), brought to the host, and put back: Shard::snapshot_state and
  // restore_state on a device. upload_states throws herd::Error on rows of another size.
  virtual void download_states(int32_t seq, std::vector<float>& rows) = 0;
  virtual void upload_states(int32_t seq, const std::vector<float>& rows) = 0;
};

// What the Vulkan forward pass cannot run of a shard of this model and spec, in words ("" when
// it can run it): the capabilities it has not yet (multi-head latent attention, linear
// attention, ...), named so that `--device auto` can say why it stays on the CPU. sliced: the
// shard is a tensor-parallel rank's slice.
std::string vulkan_unsupported(const ArchSpec& arch, const HParams& hp, bool sliced);

// The device a shard of this model runs on, from --device's text: "cpu"; "vulkan[:N]" (that
// device, checked to exist); "auto": the first Vulkan GPU (integrated or discrete: not a CPU
// driver such as lavapipe) when the Vulkan backend can run the model, else the CPU, with
// *note saying why when the machine has a GPU. Throws herd::Error on a bad choice.
Device choose_device(const std::string& text, const ArchSpec& arch, const HParams& hp,
                     std::string* note);

// Bytes of device-local memory of `device` (0 for the CPU, or when it cannot be read).
uint64_t device_memory_bytes(const Device& device);

// Uploads the weights of loaded shard `s` (whose matrices are views of `file`, packed for the
// scalar ISA: nothing repacked) to Vulkan device `index`; info: the model's (its tensor list
// names the tensors as the file spells them). Throws herd::Error naming what the device
// lacks: a capability (vulkan_unsupported), a weight type without a shader, memory; or, in a
// build without Vulkan, saying so.
std::unique_ptr<DeviceBackend> make_vulkan_backend(const Shard::State& s, const gguf::File& file,
                                                   const ModelInfo& info, int index,
                                                   const UploadProgress& progress);

}  // namespace herd::engine
