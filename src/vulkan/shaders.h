// The compiled shaders embedded in the binary (cmake/embed_spirv.cmake writes the table
// from src/vulkan/shaders/*.comp at build time): SPIR-V by name, nothing read from disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace herd::vulkan {

struct EmbeddedShader {
  const char* name;  // "matvec_q4_0_subgroup": the herd_shader() name in CMakeLists.txt
  const unsigned char* spirv;
  size_t bytes;
};
extern const EmbeddedShader kEmbeddedShaders[];
extern const size_t kEmbeddedShaderCount;

// The SPIR-V words of a shader. Throws herd::Error("[vulkan] ...") for an unknown name (a
// bug: every name the kernels ask for is compiled in).
std::vector<uint32_t> shader_spirv(std::string_view name);

}  // namespace herd::vulkan
