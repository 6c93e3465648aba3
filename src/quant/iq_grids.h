// The codebooks of the grid-based GGUF types (what defines them: iq_grids.cpp). Each grid
// row packs the magnitudes of one group of weights, one byte per weight, weight j of the
// group in byte j (bits 8j..8j+7) of the row.
#pragma once

#include <cstdint>

namespace herd::quant {

// IQ2 magnitudes 8, 25, 43 in groups of 8: IQ2_XXS (256 rows), IQ2_XS (512), IQ2_S (1024).
extern const uint64_t kIq2xxsGrid[256];
extern const uint64_t kIq2xsGrid[512];
extern const uint64_t kIq2sGrid[1024];
// IQ3 magnitudes in groups of 4: IQ3_XXS (4, 12, ..., 52, 62), IQ3_S (1, 3, ..., 15).
extern const uint32_t kIq3xxsGrid[256];
extern const uint32_t kIq3sGrid[512];
// IQ1_S and IQ1_M: groups of 8 signed bytes -1, 0, +1.
extern const uint64_t kIq1sGrid[2048];
// Sign byte of a group of 8 from its 7-bit index: bits 0-6 are the index, bit 7 makes
// the number of set bits even (the eighth sign is implied). Bit j set: weight j negative.
extern const uint8_t kIqSigns[128];

}  // namespace herd::quant
