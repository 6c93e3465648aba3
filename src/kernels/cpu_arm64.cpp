// CPU feature detection and the ISA list for arm64 builds. Every arm64 CPU has NEON; the
// kernels also need the dot-product extension (ARMv8.2 sdot, on every Apple Silicon chip
// and on Cortex-A55/A76 and later), asked of the OS: the auxiliary vector's HWCAP bits on
// Linux, sysctl's hw.optional.arm.FEAT_* flags on macOS (documented by Apple in "Determining
// instruction set characteristics"). i8mm (smmla, M2 and later) and bf16 are detected for
// the kernels that will use them.
#include <array>

#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include "kernels/kernel_table.h"

namespace herd::kernels {

namespace neon {
std::span<const MatmulKernel> matmul_kernels();
}

namespace {

#if defined(__APPLE__)
// A hw.optional.arm.FEAT_* flag: 1 when the CPU has the feature, 0 when not, -1 when the
// name does not exist (macOS 11 has no FEAT_* names).
int sysctl_flag(const char* name) {
  int value = 0;
  size_t size = sizeof value;
  if (sysctlbyname(name, &value, &size, nullptr, 0) != 0 || size != sizeof value) return -1;
  return value != 0 ? 1 : 0;
}
#endif

}  // namespace

CpuFeatures detect_cpu() {
  CpuFeatures f;
  f.neon = true;
#if defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP);
  f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
#if defined(HWCAP2_I8MM) && defined(HWCAP2_BF16)
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  f.i8mm = (hwcap2 & HWCAP2_I8MM) != 0;
  f.bf16 = (hwcap2 & HWCAP2_BF16) != 0;
#endif
#elif defined(__APPLE__)
  // A missing name is macOS 11, which ran only on M1: it has dotprod (and not the others).
  f.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd") != 0;
  f.i8mm = sysctl_flag("hw.optional.arm.FEAT_I8MM") == 1;
  f.bf16 = sysctl_flag("hw.optional.arm.FEAT_BF16") == 1;
#else
  f.dotprod = true;  // other systems on arm64: assumed (every Apple Silicon and recent core)
#endif
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
