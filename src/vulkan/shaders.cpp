#include "vulkan/shaders.h"

#include <cstring>
#include <string>

#include "util/error.h"

namespace herd::vulkan {

std::vector<uint32_t> shader_spirv(std::string_view name) {
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i) {
    const EmbeddedShader& s = kEmbeddedShaders[i];
    if (name != s.name) continue;
    HERD_CHECK_MSG(s.bytes % 4 == 0, s.name);
    std::vector<uint32_t> words(s.bytes / 4);  // copied: SPIR-V is read as 32-bit words
    std::memcpy(words.data(), s.spirv, s.bytes);
    return words;
  }
  throw Error("vulkan", "no embedded shader '" + std::string(name) + "'");
}

}  // namespace herd::vulkan
