// Block types: hand-made blocks decode to hand-computed values; random data round-trips
// within per-type error bounds; legacy quantizers are idempotent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/k_quants.h"
#include "quant/legacy_quants.h"
#include "quant/types.h"

namespace herd {
namespace {

using namespace quant;

std::vector<float> dequantize_bytes(TensorType type, const std::vector<uint8_t>& bytes) {
  const TypeTraits& row = type_traits(type);
  EXPECT_EQ(bytes.size(), row.block_bytes);
  std::vector<float> values(static_cast<size_t>(row.block_size));
  row.dequantize(bytes.data(), values.data(), row.block_size);
  return values;
}

// ---- hand-made blocks ------------------------------------------------------------------

TEST(HandBlocks, Q4_0) {
  std::vector<uint8_t> bytes(18, 0x88);  // every nibble 8: value 0
  bytes[0] = 0x00;                       // d = 0.5 (f16 0x3800, little-endian)
  bytes[1] = 0x38;
  bytes[2] = 0x80;  // q[0] = 0, q[16] = 8
  bytes[3] = 0xf1;  // q[1] = 1, q[17] = 15
  std::vector<float> expected(32, 0.0f);
  expected[0] = -4.0f;  // (0 - 8) * 0.5
  expected[1] = -3.5f;
  expected[17] = 3.5f;  // (15 - 8) * 0.5
  EXPECT_EQ(dequantize_bytes(TensorType::Q4_0, bytes), expected);
}

TEST(HandBlocks, Q4_1) {
  std::vector<uint8_t> bytes(20, 0x00);
  bytes[1] = 0x38;  // d = 0.5
  bytes[3] = 0xbc;  // m = -1.0 (0xbc00)
  bytes[4] = 0x2f;  // q[0] = 15, q[16] = 2
  std::vector<float> expected(32, -1.0f);
  expected[0] = 6.5f;  // 15 * 0.5 - 1
  expected[16] = 0.0f;
  EXPECT_EQ(dequantize_bytes(TensorType::Q4_1, bytes), expected);
}

TEST(HandBlocks, Q5_0) {
  std::vector<uint8_t> bytes(22, 0x00);
  bytes[1] = 0x3c;  // d = 1.0
  bytes[2] = 0x01;  // qh bit 0: q[0] has bit 4
  bytes[4] = 0x01;  // qh bit 16: q[16] has bit 4
  bytes[6] = 0xf3;  // q[0] low = 3, q[16] low = 15
  bytes[8] = 0x8a;  // q[2] = 10, q[18] = 8
  std::vector<float> expected(32, -16.0f);
  expected[0] = 3.0f;    // (3 | 16) - 16
  expected[16] = 15.0f;  // (15 | 16) - 16
  expected[2] = -6.0f;
  expected[18] = -8.0f;
  EXPECT_EQ(dequantize_bytes(TensorType::Q5_0, bytes), expected);
}

TEST(HandBlocks, Q8_0) {
  std::vector<uint8_t> bytes(34, 0x00);
  bytes[1] = 0x34;  // d = 0.25
  bytes[2] = 0x80;  // -128
  bytes[3] = 0xff;  // -1
  bytes[5] = 0x01;
  bytes[6] = 0x7f;  // 127
  std::vector<float> expected(32, 0.0f);
  expected[0] = -32.0f;
  expected[1] = -0.25f;
  expected[3] = 0.25f;
  expected[4] = 31.75f;
  EXPECT_EQ(dequantize_bytes(TensorType::Q8_0, bytes), expected);
}

TEST(HandBlocks, Q4_K) {
  std::vector<uint8_t> bytes(144, 0x00);
  bytes[1] = 0x3c;  // d = 1.0
  bytes[3] = 0x38;  // dmin = 0.5
  uint8_t* scales = bytes.data() + 4;
  scales[0] = 0x02;  // sub-block 0: scale 2
  scales[4] = 0x04;  //              min 4
  scales[1] = 0x81;  // sub-block 1: scale 1; top bits 2 = high bits of sub-block 5's scale
  scales[5] = 0x40;  // sub-block 1: min 0;   top bits 1 = high bits of sub-block 5's min
  scales[9] = 0x13;  // sub-block 5: scale low 3, min low 1 -> scale 35, min 17
  uint8_t* qs = bytes.data() + 16;
  qs[0] = 0x73;   // q[0] = 3 (sub-block 0), q[32] = 7 (sub-block 1)
  qs[64] = 0x50;  // q[128] = 0 (sub-block 4), q[160] = 5 (sub-block 5)
  qs[65] = 0xf0;  // q[161] = 15
  std::vector<float> expected(256, 0.0f);
  for (int i = 0; i < 32; ++i) expected[i] = -2.0f;     // 1*2*0 - 0.5*4
  for (int i = 160; i < 192; ++i) expected[i] = -8.5f;  // 35*0 - 0.5*17
  expected[0] = 4.0f;                                   // 2*3 - 2
  expected[32] = 7.0f;                                  // 1*7 - 0
  expected[160] = 166.5f;                               // 35*5 - 8.5
  expected[161] = 516.5f;                               // 35*15 - 8.5
  EXPECT_EQ(dequantize_bytes(TensorType::Q4_K, bytes), expected);
}

TEST(HandBlocks, Q6_K) {
  std::vector<uint8_t> bytes(210, 0x00);
  uint8_t* ql = bytes.data();
  uint8_t* qh = bytes.data() + 128;
  int8_t scales[16] = {2, 0, -1};
  std::memcpy(bytes.data() + 192, scales, 16);
  bytes[209] = 0x38;  // d = 0.5
  ql[0] = 0x0a;       // q[0] low 4 bits = 10
  qh[0] = 0x02;       // q[0] high 2 bits = 2 -> q = 42; q[32] high bits 0
  ql[32] = 0x01;      // q[32] low 4 bits = 1 -> q = 1
  std::vector<float> expected(256, 0.0f);
  for (int i = 0; i < 16; ++i) expected[i] = -32.0f;  // 0.5 * 2 * (0 - 32)
  for (int i = 32; i < 48; ++i) expected[i] = 16.0f;  // 0.5 * -1 * (0 - 32)
  expected[0] = 10.0f;                                // 0.5 * 2 * (42 - 32)
  expected[32] = 15.5f;                               // 0.5 * -1 * (1 - 32)
  EXPECT_EQ(dequantize_bytes(TensorType::Q6_K, bytes), expected);
}

// q8_0 rounds like roundf (halves away from zero); the K-quants' nearest_int would give
// ties to even instead.
TEST(HandBlocks, Q8_0RoundsHalvesAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127: d = 1, so x / d is x itself
  const float inputs[] = {0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49999997f, -0.49999997f, 126.5f};
  const int expected[] = {1, -1, 2, 3, -3, 0, 0, 127};
  for (int i = 0; i < 8; ++i) x[size_t(i) + 1] = inputs[i];
  BlockQ8_0 block;
  quantize_row_q8_0(x.data(), &block, 32);
  EXPECT_EQ(block.d, 0x3c00);
  EXPECT_EQ(block.qs[0], 127);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(block.qs[i + 1], expected[i]) << inputs[i];
}

// ---- random data -------------------------------------------------------------------------

std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  return values;
}

std::vector<uint8_t> quantize(TensorType type, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(row_bytes(type, int64_t(values.size())));
  type_traits(type).quantize(values.data(), bytes.data(), int64_t(values.size()));
  return bytes;
}

std::vector<float> dequantize(TensorType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  type_traits(type).dequantize(bytes.data(), values.data(), n);
  return values;
}

double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(x[i]) * x[i];
  }
  return std::sqrt(err / norm);
}

struct ErrorBound {
  TensorType type;
  double max_relative_rms;  // about 1.25x the value observed on this data
};

// Observed on 64K N(0,1) values (std::mt19937 seed 42): f16 2.1e-4, bf16 1.7e-3,
// q8_0/q8_1 5.4e-3, q4_0 0.086, q4_1 0.078, q5_0 0.043, q5_1 0.038, q2_K 0.30, q3_K 0.15,
// q4_K 0.072, q5_K 0.036, q6_K 0.018, q8_K 6.9e-3 (one scale per 256 values), iq4_nl
// 0.076, iq4_xs 0.077, mxfp4 0.115.
const ErrorBound kBounds[] = {
    {TensorType::F32, 0.0},     {TensorType::F16, 2.6e-4},   {TensorType::BF16, 2.1e-3},
    {TensorType::F64, 0.0},     {TensorType::Q8_0, 6.7e-3},  {TensorType::Q8_1, 6.7e-3},
    {TensorType::Q4_0, 0.107},  {TensorType::Q4_1, 0.098},   {TensorType::Q5_0, 0.053},
    {TensorType::Q5_1, 0.047},  {TensorType::Q2_K, 0.37},    {TensorType::Q3_K, 0.19},
    {TensorType::Q4_K, 0.09},   {TensorType::Q5_K, 0.045},   {TensorType::Q6_K, 0.022},
    {TensorType::Q8_K, 8.7e-3}, {TensorType::IQ4_NL, 0.095}, {TensorType::IQ4_XS, 0.096},
    {TensorType::MXFP4, 0.144},
};

TEST(RoundTrip, GaussianErrorWithinBound) {
  const int64_t n = 256 * 256;
  const std::vector<float> x = gaussian(n, 42);
  for (const ErrorBound& bound : kBounds) {
    const TypeTraits& row = type_traits(bound.type);
    const std::vector<float> y = dequantize(bound.type, quantize(bound.type, x), n);
    const double error = relative_rms_error(x, y);
    EXPECT_LE(error, bound.max_relative_rms) << row.name;
    // A bound far above the error would hide a regression.
    if (bound.max_relative_rms > 0) {
      EXPECT_GE(error, bound.max_relative_rms / 2) << row.name;
    }
    std::printf("  %-5s relative rms error %.3g\n", std::string(row.name).c_str(), error);
  }
}

TEST(RoundTrip, EveryWritableTypeHasABound) {
  for (uint32_t id = 0; id < 64; ++id) {
    const TypeTraits* row = find_type_traits(id);
    if (row == nullptr || row->quantize == nullptr) continue;
    bool found = false;
    for (const ErrorBound& bound : kBounds) found = found || bound.type == row->type;
    EXPECT_TRUE(found) << row->name;
  }
}

// Zeros, a constant and a single spike: the degenerate paths of the scale searches.
TEST(RoundTrip, DegenerateBlocks) {
  const int64_t n = 512;
  std::vector<std::vector<float>> inputs = {
      std::vector<float>(n, 0.0f), std::vector<float>(n, 0.75f), std::vector<float>(n, -3.0f)};
  std::vector<float> spike(n, 0.0f);
  spike[37] = 5.0f;
  inputs.push_back(spike);
  for (const ErrorBound& bound : kBounds) {
    const TypeTraits& row = type_traits(bound.type);
    for (const std::vector<float>& x : inputs) {
      const std::vector<float> y = dequantize(bound.type, quantize(bound.type, x), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isfinite(y[size_t(i)])) << row.name;
        // Constants and zeros are exact or nearly so; a lone spike keeps its sign and
        // size within the type's coarsest step. iq4 levels have no zero: the zeros beside
        // the spike decode to its scale, 5 / 113.
        const double no_zero = bound.type == TensorType::IQ4_NL || bound.type == TensorType::IQ4_XS;
        ASSERT_NEAR(y[size_t(i)], x[size_t(i)],
                    std::abs(x[size_t(i)]) * 0.35 + 0.02 + 0.03 * no_zero)
            << row.name << " i=" << i;
      }
    }
  }
}

// Blocks are quantized independently: a row equals its blocks quantized one by one.
TEST(RoundTrip, BlocksAreIndependent) {
  const std::vector<float> x = gaussian(1024, 7);
  for (const ErrorBound& bound : kBounds) {
    const TypeTraits& row = type_traits(bound.type);
    const std::vector<uint8_t> whole = quantize(bound.type, x);
    std::vector<uint8_t> pieces(whole.size());
    for (int64_t b = 0; b < int64_t(x.size()) / row.block_size; ++b) {
      row.quantize(x.data() + b * row.block_size, pieces.data() + b * row.block_bytes,
                   row.block_size);
    }
    EXPECT_EQ(whole, pieces) << row.name;
  }
}

// Legacy types: quantizing the dequantized values gives back the same bytes, since every
// block's extreme value lands exactly on a level again. (Not q8_1: its s field is rounded
// from the scale before the scale's own rounding to f16, so it moves by an f16 ulp.)
TEST(RoundTrip, LegacyQuantizersAreIdempotent) {
  const int64_t n = 256 * 64;
  const std::vector<float> x = gaussian(n, 3);
  for (TensorType type :
       {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0}) {
    const std::vector<uint8_t> once = quantize(type, x);
    const std::vector<uint8_t> twice = quantize(type, dequantize(type, once, n));
    EXPECT_EQ(once, twice) << type_traits(type).name;
  }
}

TEST(RoundTrip, Q8AuxiliaryFields) {
  const std::vector<float> x = gaussian(512, 11);
  std::vector<BlockQ8_1> q8_1(512 / 32);
  quantize_row_q8_1(x.data(), q8_1.data(), 512);
  for (const BlockQ8_1& block : q8_1) {
    int sum = 0;
    for (int8_t q : block.qs) sum += q;
    // s is d * sum rounded to f16, with d before its own rounding to f16.
    const float d = fp16_to_fp32(block.d);
    EXPECT_NEAR(fp16_to_fp32(block.s), float(sum) * d, std::abs(float(sum) * d) * 2e-3f);
  }
  std::vector<BlockQ8_K> q8_k(2);
  quantize_row_q8_k(x.data(), q8_k.data(), 512);
  for (const BlockQ8_K& block : q8_k) {
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * j + i];
      EXPECT_EQ(block.bsums[j], sum);
    }
  }
}

}  // namespace
}  // namespace herd
