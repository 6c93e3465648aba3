// CPU features and the ISA list for targets without SIMD kernels: the scalar reference
// only.
#include <array>

#include "kernels/kernel_table.h"

namespace herd::kernels {

CpuFeatures detect_cpu() {
  return {};
}

Isa best_isa(const CpuFeatures&, Isa) {
  return Isa::kScalar;
}

std::span<const Isa> compiled_isas() {
  static constexpr std::array kIsas = {Isa::kScalar};
  return kIsas;
}

std::span<const MatmulKernel> isa_kernels(Isa isa) {
  if (isa == Isa::kScalar) return scalar::matmul_kernels();
  return {};
}

}  // namespace herd::kernels
