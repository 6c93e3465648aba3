// CPU feature detection and the ISA list for x86-64 builds. An ISA counts only when both
// the CPU has the instructions (cpuid) and the OS saves their register state on context
// switches (xgetbv): a kernel with AVX-512 enabled in the BIOS but not in the OS would
// fault.
#include <cpuid.h>

#include <array>

#include "kernels/kernel_table.h"

namespace herd::kernels {

namespace avx2 {
std::span<const MatmulKernel> matmul_kernels();
}
namespace avx512 {
std::span<const MatmulKernel> matmul_kernels();
}

namespace {

struct CpuidRegisters {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegisters cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegisters r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return {};
  return r;
}

bool bit(unsigned value, int index) {
  return (value >> index) & 1u;
}

// XCR0: which register states the OS saves. Only valid when cpuid says OSXSAVE.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

constexpr uint64_t kXcr0SseAvx = 0x6;   // XMM and YMM state
constexpr uint64_t kXcr0Avx512 = 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM state

}  // namespace

CpuFeatures detect_cpu() {
  CpuFeatures f;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return f;
  const CpuidRegisters leaf1 = cpuid(1, 0);
  const bool osxsave = bit(leaf1.ecx, 27);
  const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_avx = (xcr0 & kXcr0SseAvx) == kXcr0SseAvx && bit(leaf1.ecx, 28);
  const bool os_avx512 = os_avx && (xcr0 & kXcr0Avx512) == kXcr0Avx512;
  if (!os_avx || max_leaf < 7) return f;

  const CpuidRegisters leaf7 = cpuid(7, 0);
  const CpuidRegisters leaf7_1 = cpuid(7, 1);
  f.fma = bit(leaf1.ecx, 12);
  f.f16c = bit(leaf1.ecx, 29);
  f.avx2 = bit(leaf7.ebx, 5);
  if (os_avx512) {
    f.avx512f = bit(leaf7.ebx, 16);
    f.avx512bw = bit(leaf7.ebx, 30);
    f.avx512vl = bit(leaf7.ebx, 31);
    f.avx512vnni = bit(leaf7.ecx, 11);
    f.avx512bf16 = bit(leaf7_1.eax, 5);
  }
  return f;
}

Isa best_isa(const CpuFeatures& cpu, Isa limit) {
  const bool has_avx2 = cpu.avx2 && cpu.fma && cpu.f16c;
  const bool has_avx512 = has_avx2 && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512vnni;
  if (limit == Isa::kAvx512 && has_avx512) return Isa::kAvx512;
  if ((limit == Isa::kAvx512 || limit == Isa::kAvx2) && has_avx2) return Isa::kAvx2;
  return Isa::kScalar;
}

std::span<const Isa> compiled_isas() {
  static constexpr std::array kIsas = {Isa::kAvx512, Isa::kAvx2, Isa::kScalar};
  return kIsas;
}

std::span<const MatmulKernel> isa_kernels(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return scalar::matmul_kernels();
    case Isa::kAvx2:
      return avx2::matmul_kernels();
    case Isa::kAvx512:
      return avx512::matmul_kernels();
    case Isa::kNeon:
      break;
  }
  return {};
}

}  // namespace herd::kernels
