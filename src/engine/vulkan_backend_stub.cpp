// The build without Vulkan (no headers, loader or glslc at build time): a shard asked to run
// on a Vulkan device says why it cannot.
#include "engine/backend.h"

#include "util/error.h"

namespace herd::engine {

std::unique_ptr<DeviceBackend> make_vulkan_backend(const Shard::State&, const gguf::File&,
                                                   const ModelInfo&, int, const UploadProgress&) {
  throw Error("engine",
              "this herd was built without Vulkan (no Vulkan headers, loader or glslc at build "
              "time: scripts/install-deps, then build again)");
}

}  // namespace herd::engine
