// CPU feature detection and the ISA list for arm64 builds. Every arm64 CPU has NEON; the
// kernels also need the dot-product extension (ARMv8.2 sdot, on every Apple Silicon chip
// and on Cortex-A55/A76 and later), asked of the OS where it can say.
#include <array>

#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "kernels/kernel_table.h"

namespace herd::kernels {

namespace neon {
std::span<const MatmulKernel> matmul_kernels();
}

namespace {

bool os_reports_dotprod() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return true;  // macOS: every Apple Silicon CPU has it
#endif
}

}  // namespace

CpuFeatures detect_cpu() {
  CpuFeatures f;
  f.neon = true;
  f.dotprod = os_reports_dotprod();
  return f;
}

Isa best_isa(const CpuFeatures& cpu, Isa limit) {
  if (limit != Isa::kScalar && cpu.neon && cpu.dotprod) return Isa::kNeon;
  return Isa::kScalar;
}

std::span<const Isa> compiled_isas() {
  static constexpr std::array kIsas = {Isa::kNeon, Isa::kScalar};
  return kIsas;
}

std::span<const MatmulKernel> isa_kernels(Isa isa) {
  if (isa == Isa::kScalar) return scalar::matmul_kernels();
  if (isa == Isa::kNeon) return neon::matmul_kernels();
  return {};
}

}  // namespace herd::kernels
