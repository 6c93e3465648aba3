// Every ISA's activation quantizer must produce the same bytes as the baseline ones in
// activations.cpp (which follow ggml's reference quantizers), including the corner cases
// that a SIMD rewrite gets wrong first: rounding ties, all-zero blocks, and a largest
// magnitude that occurs twice with opposite signs (q8_K takes the sign of the first).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"

namespace herd::kernels {
namespace {

std::vector<float> tricky_row(int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = normal(rng);
  // Block 0: halves after scaling (amax 127 makes the scale exactly 1).
  for (int j = 0; j < 31; ++j) x[size_t(j)] = (j % 2 ? -1.0f : 1.0f) * (float(j) + 0.5f);
  x[31] = 127.0f;
  // Block 1: zeros.
  for (int j = 32; j < 64; ++j) x[size_t(j)] = 0.0f;
  // Second 256-block (if any): +-amax twice, the negative one first.
  if (cols >= 512) {
    x[300] = -9.0f;
    x[400] = 9.0f;
  }
  // A zero 256-block at the end (if there are three or more).
  if (cols >= 768) std::fill(x.end() - 256, x.end(), 0.0f);
  return x;
}

// The baseline quantizer for an ISA's entry.
void (*baseline_for(const MatmulKernel& k))(const float*, int64_t, uint8_t*) {
  switch (k.type) {
    case TensorType::Q4_0:
      return quantize_act_offset<8>;
    case TensorType::Q5_0:
      return quantize_act_offset<16>;
    case TensorType::Q8_0:  // biased to unsigned only where the ISA lacks a signed dot
    case TensorType::IQ4_NL:
    case TensorType::MXFP4:
      return k.isa == Isa::kAvx512 ? quantize_act_offset<128> : quantize_act_offset<0>;
    case TensorType::Q4_1:
    case TensorType::Q5_1:
      return quantize_act_min;
    case TensorType::F32:
    case TensorType::F16:
      return copy_act_f32;
    case TensorType::BF16:
      return round_act_bf16;
    default:
      return quantize_act_k;
  }
}

TEST(Activations, EveryIsaMatchesTheBaselineBitForBit) {
  const CpuFeatures cpu = detect_cpu();
  for (Isa isa : compiled_isas()) {
    if (isa == Isa::kScalar) continue;  // the scalar kernels use ggml's own block types
    if (best_isa(cpu, isa) != isa) {
      std::printf("this CPU lacks %s: its activation quantizers are not tested\n",
                  std::string(isa_name(isa)).c_str());
      continue;
    }
    for (const MatmulKernel& k : isa_kernels(isa)) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(type_traits(k.type).name));
      const int64_t cols = 1024;
      const std::vector<float> x = tricky_row(cols, uint32_t(k.type));
      const size_t bytes = k.activation_row_bytes(cols);
      std::vector<uint8_t> got(bytes, 0xaa), want(bytes, 0x55);
      k.quantize_activations(x.data(), cols, got.data());
      baseline_for(k)(x.data(), cols, want.data());
      EXPECT_EQ(got, want);
    }
  }
}

}  // namespace
}  // namespace herd::kernels
