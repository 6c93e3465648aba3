// iq4_nl, iq4_xs, mxfp4: hand-made blocks decode to hand-computed values, random blocks
// decode exactly as the reference's Python (gguf-py) decodes them, and the quantizers
// keep the reference's invariants.
#include "quant/iq4_quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/types.h"
#include "util/mapped_file.h"

namespace herd {
namespace {

using namespace quant;

std::vector<float> dequantize_bytes(TensorType type, const std::vector<uint8_t>& bytes) {
  const TypeTraits& row = type_traits(type);
  EXPECT_EQ(bytes.size() % row.block_bytes, 0u);
  std::vector<float> values(bytes.size() / row.block_bytes * size_t(row.block_size));
  row.dequantize(bytes.data(), values.data(), int64_t(values.size()));
  return values;
}

// ---- hand-made blocks ------------------------------------------------------------------

TEST(Iq4HandBlocks, IQ4_NL) {
  std::vector<uint8_t> bytes(18, 0x88);  // index 8 everywhere: level 1
  bytes[0] = 0x00;                       // d = 0.5
  bytes[1] = 0x38;
  bytes[2] = 0xf0;   // q[0] = 0 (-127), q[16] = 15 (113)
  bytes[17] = 0x07;  // q[15] = 7 (-10), q[31] = 0 (-127)
  std::vector<float> expected(32, 0.5f);
  expected[0] = -63.5f;
  expected[16] = 56.5f;
  expected[15] = -5.0f;
  expected[31] = -63.5f;
  EXPECT_EQ(dequantize_bytes(TensorType::IQ4_NL, bytes), expected);
}

TEST(Iq4HandBlocks, IQ4_XS) {
  std::vector<uint8_t> bytes(136, 0x88);
  bytes[0] = 0x00;  // d = 0.25
  bytes[1] = 0x34;
  // Sub-block scales ls: 32 (scale 0) everywhere but s = 0: ls 33 (+1), s = 3: ls 0 (-32),
  // s = 7: ls 63 (+31).
  const int ls[8] = {33, 32, 32, 0, 32, 32, 32, 63};
  uint16_t scales_h = 0;
  for (int s = 0; s < 8; ++s) {
    scales_h = uint16_t(scales_h | (ls[s] >> 4) << (2 * s));
    uint8_t& low = bytes[4 + size_t(s) / 2];
    low = uint8_t(s % 2 == 0 ? (ls[s] & 15) : (low | (ls[s] & 15) << 4));
  }
  bytes[2] = uint8_t(scales_h & 0xff);
  bytes[3] = uint8_t(scales_h >> 8);
  bytes[8] = 0x0f;                // sub-block 0: q[0] = 15 (113), q[16] = 0 (-127)
  bytes[8 + 16 * 3] = 0x00;       // sub-block 3: q[96] = q[112] = 0 (-127)
  bytes[8 + 16 * 7 + 15] = 0x9f;  // sub-block 7: q[239] = 15 (113), q[255] = 9 (13)
  std::vector<float> expected(256, 0.0f);
  for (int i = 0; i < 32; ++i) expected[size_t(i)] = 0.25f;     // 0.25 * 1 * 1
  for (int i = 96; i < 128; ++i) expected[size_t(i)] = -8.0f;   // 0.25 * -32 * 1
  for (int i = 224; i < 256; ++i) expected[size_t(i)] = 7.75f;  // 0.25 * 31 * 1
  expected[0] = 28.25f;                                         // 0.25 * 113
  expected[16] = -31.75f;                                       // 0.25 * -127
  expected[96] = 1016.0f;                                       // 0.25 * -32 * -127
  expected[112] = 1016.0f;
  expected[239] = 875.75f;  // 0.25 * 31 * 113
  expected[255] = 100.75f;  // 0.25 * 31 * 13
  EXPECT_EQ(dequantize_bytes(TensorType::IQ4_XS, bytes), expected);
}

TEST(Iq4HandBlocks, MXFP4) {
  std::vector<uint8_t> bytes(17 * 2, 0x00);
  bytes[0] = 128;   // block 0: d = 2^0 = 1 (half the E8M0 value 2)
  bytes[1] = 0xf7;  // q[0] = 7 (12), q[16] = 15 (-12)
  bytes[2] = 0x89;  // q[1] = 9 (-1), q[17] = 8 (E2M1's -0, decoded as 0 by the reference)
  bytes[17] = 0;    // block 1: d = 2^-128, subnormal
  bytes[18] = 0x01;
  std::vector<float> expected(64, 0.0f);
  expected[0] = 12.0f;
  expected[16] = -12.0f;
  expected[1] = -1.0f;
  expected[32] = std::ldexp(1.0f, -128);
  EXPECT_EQ(dequantize_bytes(TensorType::MXFP4, bytes), expected);
}

TEST(Iq4HandBlocks, Mxfp4ScaleIsExactForEveryExponent) {
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(mxfp4_scale(uint8_t(e)), std::ldexp(1.0f, e - 128)) << e;
  }
}

// ---- the reference's decoder ---------------------------------------------------------------

// testdata/iq4_gguf_py.bin: random blocks and what gguf-py's dequantize makes of them.
// Per type, in this order: iq4_nl 16 blocks, iq4_xs 4 blocks, mxfp4 16 blocks, each as
//   | blocks (GGUF bytes) | float32 values of those blocks, little-endian |
// Made by a throwaway script (not committed: it imports the reference's code) with numpy
// 1.24.2: rng = numpy.random.default_rng(20261201); per type in the order above,
// b = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=uint8); for iq4_nl and
// iq4_xs each block's f16 d (bytes 0-1) is then replaced by int(rng.integers(0, 65536)),
// redrawn while its exponent bits are 31 (inf, nan); for mxfp4 the e bytes of blocks 0-2
// are set to 0, 1 and 255; values = gguf.quants.dequantize(b.reshape(-1), type) as '<f4'.
// gguf-py: ik_llama.cpp's at 8337e4cd3 for iq4_nl and iq4_xs; that fork's gguf-py has no
// MXFP4 decoder, so mxfp4 used llama.cpp gguf-py's MXFP4 class (dequantize_blocks and
// e8m0_to_fp32_half) registered into it. mxfp4 blocks with e = 255 overflow to +-inf there
// and here alike.
const char* const kFixture = "src/quant/testdata/iq4_gguf_py.bin";

struct FixtureType {
  TensorType type;
  int n_blocks;
};
constexpr FixtureType kFixtureTypes[] = {
    {TensorType::IQ4_NL, 16}, {TensorType::IQ4_XS, 4}, {TensorType::MXFP4, 16}};

TEST(Iq4Reference, DecodesLikeGgufPy) {
  const std::string file = read_file(kFixture);
  size_t offset = 0;
  for (const FixtureType& t : kFixtureTypes) {
    const TypeTraits& row = type_traits(t.type);
    SCOPED_TRACE(std::string(row.name));
    const size_t block_bytes = row.block_bytes * size_t(t.n_blocks);
    const size_t n = size_t(row.block_size) * size_t(t.n_blocks);
    ASSERT_LE(offset + block_bytes + n * 4, file.size());
    const std::vector<uint8_t> blocks(file.begin() + long(offset),
                                      file.begin() + long(offset + block_bytes));
    std::vector<float> expected(n);
    std::memcpy(expected.data(), file.data() + offset + block_bytes, n * 4);
    offset += block_bytes + n * 4;
    const std::vector<float> ours = dequantize_bytes(t.type, blocks);
    ASSERT_EQ(ours.size(), expected.size());
    for (size_t i = 0; i < n; ++i) {
      // Bit for bit: the same float products in the same order (-0 included).
      ASSERT_EQ(std::bit_cast<uint32_t>(ours[i]), std::bit_cast<uint32_t>(expected[i]))
          << "value " << i << ": " << ours[i] << " vs " << expected[i];
    }
  }
  EXPECT_EQ(offset, file.size());
}

// ---- quantizers ----------------------------------------------------------------------------

std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  return values;
}

double squared_error(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return err;
}

// ik_llama.cpp's search starts where ggml's does and only keeps improvements of the
// weighted fit, so on the whole it must not be worse.
TEST(Iq4Quantize, IkSearchIsNoWorseThanGgml) {
  const int64_t n = 256 * 64;
  const std::vector<float> x = gaussian(n, 5);
  std::vector<BlockIQ4_NL> nl(size_t(n / 32));
  std::vector<float> y(static_cast<size_t>(n));
  quantize_row_iq4_nl(x.data(), nl.data(), n, Iq4Search::kGgml);
  dequantize_row_iq4_nl(nl.data(), y.data(), n);
  const double ggml_nl = squared_error(x, y);
  quantize_row_iq4_nl(x.data(), nl.data(), n, Iq4Search::kIkLlama);
  dequantize_row_iq4_nl(nl.data(), y.data(), n);
  const double ik_nl = squared_error(x, y);
  EXPECT_LE(ik_nl, ggml_nl);

  std::vector<BlockIQ4_XS> xs(size_t(n / 256));
  quantize_row_iq4_xs(x.data(), xs.data(), n, Iq4Search::kGgml);
  dequantize_row_iq4_xs(xs.data(), y.data(), n);
  const double ggml_xs = squared_error(x, y);
  quantize_row_iq4_xs(x.data(), xs.data(), n, Iq4Search::kIkLlama);
  dequantize_row_iq4_xs(xs.data(), y.data(), n);
  const double ik_xs = squared_error(x, y);
  EXPECT_LE(ik_xs, ggml_xs * 1.01);
  std::printf("  relative rms: iq4_nl ggml %.4f ik %.4f, iq4_xs ggml %.4f ik %.4f\n",
              std::sqrt(ggml_nl / double(n)), std::sqrt(ik_nl / double(n)),
              std::sqrt(ggml_xs / double(n)), std::sqrt(ik_xs / double(n)));
}

// mxfp4: the exponent puts the block's largest magnitude between 8 and 16 level units
// (the largest level is 12), and every value takes its nearest level.
TEST(Iq4Quantize, Mxfp4PicksExponentAndNearestLevels) {
  std::vector<float> x = gaussian(32 * 64, 9);
  for (size_t b = 0; b < 64; ++b) {
    for (size_t j = 0; j < 32; ++j) x[32 * b + j] *= std::ldexp(1.0f, int(b) - 32);
  }
  std::vector<BlockMXFP4> blocks(64);
  quantize_row_mxfp4(x.data(), blocks.data(), int64_t(x.size()));
  for (size_t b = 0; b < 64; ++b) {
    const float d = mxfp4_scale(blocks[b].e);
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    EXPECT_GE(amax, 8 * d) << b;
    EXPECT_LT(amax, 16 * d) << b;
    for (size_t j = 0; j < 32; ++j) {
      const int q = j < 16 ? blocks[b].qs[j] & 15 : blocks[b].qs[j - 16] >> 4;
      const float chosen = std::fabs(kValuesMxfp4[q] * d - x[32 * b + j]);
      for (int8_t level : kValuesMxfp4) {
        ASSERT_LE(chosen, std::fabs(level * d - x[32 * b + j])) << b << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace herd
