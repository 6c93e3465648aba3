// The matmul kernels of the grid-based types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M), one set per ISA, for the ISA files' rows of the kernel table. All read
// the GGUF rows as they are (no repacking: a grid index cannot be split into lanes without
// decoding it) and ActQ8K activations (Q8_K values, as the reference quantizes them for
// these types). Internal to the kernels module.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"

namespace herd::kernels::iq_grid {

// Each ISA namespace: per-thread scratch (decoded rows) and one gemm per type.
namespace scalar {
size_t scratch_bytes(int64_t cols);
void gemm_iq2_xxs(const GemmArgs& args);
void gemm_iq2_xs(const GemmArgs& args);
void gemm_iq2_s(const GemmArgs& args);
void gemm_iq3_xxs(const GemmArgs& args);
void gemm_iq3_s(const GemmArgs& args);
void gemm_iq1_s(const GemmArgs& args);
void gemm_iq1_m(const GemmArgs& args);
}  // namespace scalar

namespace avx2 {
size_t scratch_bytes(int64_t cols);
void gemm_iq2_xxs(const GemmArgs& args);
void gemm_iq2_xs(const GemmArgs& args);
void gemm_iq2_s(const GemmArgs& args);
void gemm_iq3_xxs(const GemmArgs& args);
void gemm_iq3_s(const GemmArgs& args);
void gemm_iq1_s(const GemmArgs& args);
void gemm_iq1_m(const GemmArgs& args);
}  // namespace avx2

namespace avx512 {
size_t scratch_bytes(int64_t cols);
void gemm_iq2_xxs(const GemmArgs& args);
void gemm_iq2_xs(const GemmArgs& args);
void gemm_iq2_s(const GemmArgs& args);
void gemm_iq3_xxs(const GemmArgs& args);
void gemm_iq3_s(const GemmArgs& args);
void gemm_iq1_s(const GemmArgs& args);
void gemm_iq1_m(const GemmArgs& args);
}  // namespace avx512

namespace neon {
size_t scratch_bytes(int64_t cols);
void gemm_iq2_xxs(const GemmArgs& args);
void gemm_iq2_xs(const GemmArgs& args);
void gemm_iq2_s(const GemmArgs& args);
void gemm_iq3_xxs(const GemmArgs& args);
void gemm_iq3_s(const GemmArgs& args);
void gemm_iq1_s(const GemmArgs& args);
void gemm_iq1_m(const GemmArgs& args);
}  // namespace neon

}  // namespace herd::kernels::iq_grid
