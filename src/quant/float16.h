// Half-precision conversions: IEEE binary16 ("f16") and bfloat16 ("bf16"), stored as their
// raw 16-bit patterns. Integer-only code, so the result does not depend on the FPU's
// rounding mode, the compiler's flags or the CPU; kernels may call these in inner loops.
//
// fp32_to_fp16 rounds to nearest, ties to even, exactly as x86 F16C `vcvtps2ph` with
// immediate 0 (what ggml's GGML_FP32_TO_FP16 uses on such CPUs, and what its portable
// fallback computes): overflow goes to +-inf, tiny values to f16 subnormals or +-0,
// NaN stays NaN (quiet bit set, top payload bits kept, as F16C does).
// fp32_to_bf16 is ggml's ggml_compute_fp32_to_bf16: round to nearest even, NaN forced
// quiet, subnormals kept.
#pragma once

#include <bit>
#include <cstdint>

namespace herd {

//   f16:  s eeeee mmmmmmmmmm        (bias 15)
//   f32:  s eeeeeeee mmm...m (23)   (bias 127)
constexpr float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN: keep the payload
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = float(mantissa) * 0x1.0p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

constexpr uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN
    return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = 0x477ff000 is halfway between 65504 (largest f16) and 65536: the tie rounds to
  // the even neighbour, which is 65536, i.e. inf.
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // below 2^-14: f16 subnormal or zero
    const uint32_t exponent = magnitude >> 23;
    if (exponent < 102) return sign;  // below 2^-25: rounds to zero (no tie possible)
    // value = m * 2^(exponent-150); in units of 2^-24 that is m >> (126 - exponent).
    const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t result = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (result & 1))) ++result;  // may carry into 2^-14
    return uint16_t(sign | result);
  }
  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits, rounding to even;
  // a carry out of the mantissa correctly bumps the exponent.
  uint32_t result = (magnitude - (112u << 23)) >> 13;
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1))) ++result;
  return uint16_t(sign | result);
}

//   bf16: the upper half of an f32.
constexpr float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(uint32_t(h) << 16);
}

constexpr uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40u);  // quiet NaN
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace herd
