#include "quant/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace herd {
namespace {

float from_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

TEST(Fp16, SpecialValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);  // largest finite f16
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // the tie rounds to even: inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);

  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(nan & 0x0200, 0x0200);  // quiet
  // A signalling NaN whose payload sits only in the low bits must not become inf.
  const uint16_t snan = fp32_to_fp16(from_bits(0x7f800001u));
  EXPECT_EQ(snan, 0x7e00);
  EXPECT_EQ(fp32_to_fp16(from_bits(0xffc00000u)), 0xfe00);

  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7c01)));
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
}

TEST(Fp16, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest f16 subnormal
  EXPECT_EQ(fp32_to_fp16(tiny), 0x0001);
  EXPECT_EQ(fp16_to_fp32(0x0001), tiny);
  EXPECT_EQ(fp32_to_fp16(-tiny), 0x8001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 1: even
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie between 1 and 2
  EXPECT_EQ(fp32_to_fp16(5 * std::ldexp(1.0f, -25)), 0x0002);  // tie between 2 and 3
  EXPECT_EQ(fp32_to_fp16(1023 * tiny), 0x03ff);                // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03ff), 1023 * tiny);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(1023.5f * tiny), 0x0400);         // tie rounds up to the normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(from_bits(0x00000001u)), 0x0000);  // f32 subnormal
}

TEST(Fp16, TiesRoundToEven) {
  const float ulp = std::ldexp(1.0f, -10);              // f16 spacing in [1, 2)
  EXPECT_EQ(fp32_to_fp16(1.0f + ulp / 2), 0x3c00);      // between 0x3c00 and 0x3c01
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * ulp / 2), 0x3c02);  // between 0x3c01 and 0x3c02
  EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3c01);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f + 3 * ulp / 2, 0.0f)), 0x3c01);
  EXPECT_EQ(fp32_to_fp16(2.0f - ulp / 2), 0x4000);  // carries into the exponent
  EXPECT_EQ(fp32_to_fp16(-(1.0f + ulp / 2)), 0xbc00);
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) {
      EXPECT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << "h=" << h;
  }
}

// Every f32 halfway between two adjacent f16 values, and its two neighbours, rounds as
// round-to-nearest-even says. Checked against the exact midpoint in double.
TEST(Fp16, MidpointsAndNeighbours) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double lo = fp16_to_fp32(uint16_t(h));
    const double hi = fp16_to_fp32(uint16_t(h + 1));
    const float mid = float((lo + hi) / 2);  // exact: f16 values have 11 significant bits
    ASSERT_EQ(double(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
    ASSERT_EQ(fp32_to_fp16(mid), even) << "h=" << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), h) << "h=" << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e9f)), h + 1) << "h=" << h;
    ASSERT_EQ(fp32_to_fp16(-mid), 0x8000 | even) << "h=" << h;
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion (IEEE round to nearest even) as an independent
// reference, on a strided sweep of all f32 bit patterns.
TEST(Fp16, MatchesCompilerFloat16) {
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 257) {
    const float f = from_bits(uint32_t(bits));
    if (std::isnan(f)) continue;
    const _Float16 reference = static_cast<_Float16>(f);
    ASSERT_EQ(fp32_to_fp16(f), std::bit_cast<uint16_t>(reference)) << "bits=" << bits;
  }
}
#endif

TEST(Bf16, Conversions) {
  EXPECT_EQ(fp32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
  // Ties to even.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
  // Overflow and infinities.
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // NaN stays NaN and becomes quiet, even when its payload is only in the low half.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(fp32_to_bf16(from_bits(0xffc00000u)), 0xffc0);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7fc0)));
  // Subnormals are rounded, not flushed.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00008000u)), 0x0000);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00008001u)), 0x0001);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h);
  }
}

}  // namespace
}  // namespace herd
