// The tensor-type table itself, and the conversions of the plain (one element per block)
// types. Block types live in legacy_quants.cpp and k_quants.cpp; this file only adapts
// their typed row functions to the table's untyped signature.
#include "quant/types.h"

#include <array>
#include <cstring>
#include <string>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/iq4_quants.h"
#include "quant/iq_grid_quants.h"
#include "quant/k_quants.h"
#include "quant/legacy_quants.h"
#include "util/error.h"

namespace herd {
namespace {

using namespace quant;

// ---- plain types: element-wise conversion ---------------------------------------------

// memcpy per element: tensor data in a GGUF file need not be aligned for T.
template <typename T>
T load(const void* src, int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const char*>(src) + i * int64_t(sizeof(T)), sizeof(T));
  return value;
}

template <typename T>
void store(void* dst, int64_t i, T value) {
  std::memcpy(static_cast<char*>(dst) + i * int64_t(sizeof(T)), &value, sizeof(T));
}

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load<uint16_t>(src, i));
}
void quantize_f16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, fp32_to_fp16(src[i]));
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load<uint16_t>(src, i));
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, fp32_to_bf16(src[i]));
}

void quantize_f64(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store<double>(dst, i, double(src[i]));
}

// Integer and f64 tensors read as floats (rounded to nearest when not exact).
template <typename T>
void dequantize_cast(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<T>(src, i));
}

// ---- block types: typed row functions behind the untyped signature --------------------

// A partial block would be silently dropped by the row functions: that is a caller's bug.
template <typename Block, int64_t kBlockSize, void (*kDequantize)(const Block*, float*, int64_t)>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  HERD_CHECK_MSG(n % kBlockSize == 0, "n=" + std::to_string(n));
  kDequantize(static_cast<const Block*>(src), dst, n);
}

template <typename Block, int64_t kBlockSize, void (*kQuantize)(const float*, Block*, int64_t)>
void quantize_blocks(const float* src, void* dst, int64_t n) {
  HERD_CHECK_MSG(n % kBlockSize == 0, "n=" + std::to_string(n));
  kQuantize(src, static_cast<Block*>(dst), n);
}

void quantize_q6_k_ggml(const float* src, BlockQ6_K* dst, int64_t n) {
  quantize_row_q6_k(src, dst, n, Q6KSearch::kGgml);
}

template <TensorType kType, typename Block, int64_t kBlockSize,
          void (*kDequantize)(const Block*, float*, int64_t),
          void (*kQuantize)(const float*, Block*, int64_t)>
constexpr TypeTraits block_row(std::string_view name) {
  return {kType,
          name,
          kBlockSize,
          sizeof(Block),
          &dequantize_blocks<Block, kBlockSize, kDequantize>,
          &quantize_blocks<Block, kBlockSize, kQuantize>};
}

// A type herd reads but does not write (quantize == nullptr).
template <TensorType kType, typename Block, int64_t kBlockSize,
          void (*kDequantize)(const Block*, float*, int64_t)>
constexpr TypeTraits read_only_block_row(std::string_view name) {
  return {
      kType,  name, kBlockSize, sizeof(Block), &dequantize_blocks<Block, kBlockSize, kDequantize>,
      nullptr};
}

constexpr std::array kTable = {
    TypeTraits{TensorType::F32, "f32", 1, 4, &dequantize_f32, &quantize_f32},
    TypeTraits{TensorType::F16, "f16", 1, 2, &dequantize_f16, &quantize_f16},
    block_row<TensorType::Q4_0, BlockQ4_0, kQK, dequantize_row_q4_0, quantize_row_q4_0>("q4_0"),
    block_row<TensorType::Q4_1, BlockQ4_1, kQK, dequantize_row_q4_1, quantize_row_q4_1>("q4_1"),
    block_row<TensorType::Q5_0, BlockQ5_0, kQK, dequantize_row_q5_0, quantize_row_q5_0>("q5_0"),
    block_row<TensorType::Q5_1, BlockQ5_1, kQK, dequantize_row_q5_1, quantize_row_q5_1>("q5_1"),
    block_row<TensorType::Q8_0, BlockQ8_0, kQK, dequantize_row_q8_0, quantize_row_q8_0>("q8_0"),
    block_row<TensorType::Q8_1, BlockQ8_1, kQK, dequantize_row_q8_1, quantize_row_q8_1>("q8_1"),
    block_row<TensorType::Q2_K, BlockQ2_K, kQK_K, dequantize_row_q2_k, quantize_row_q2_k>("q2_K"),
    block_row<TensorType::Q3_K, BlockQ3_K, kQK_K, dequantize_row_q3_k, quantize_row_q3_k>("q3_K"),
    block_row<TensorType::Q4_K, BlockQ4_K, kQK_K, dequantize_row_q4_k, quantize_row_q4_k>("q4_K"),
    block_row<TensorType::Q5_K, BlockQ5_K, kQK_K, dequantize_row_q5_k, quantize_row_q5_k>("q5_K"),
    block_row<TensorType::Q6_K, BlockQ6_K, kQK_K, dequantize_row_q6_k, quantize_q6_k_ggml>("q6_K"),
    block_row<TensorType::Q8_K, BlockQ8_K, kQK_K, dequantize_row_q8_k, quantize_row_q8_k>("q8_K"),
    // Grid types: no quantizer (the reference's needs an importance matrix and grid searches).
    read_only_block_row<TensorType::IQ2_XXS, BlockIQ2_XXS, kQK_K, dequantize_row_iq2_xxs>(
        "iq2_xxs"),
    read_only_block_row<TensorType::IQ2_XS, BlockIQ2_XS, kQK_K, dequantize_row_iq2_xs>("iq2_xs"),
    read_only_block_row<TensorType::IQ3_XXS, BlockIQ3_XXS, kQK_K, dequantize_row_iq3_xxs>(
        "iq3_xxs"),
    read_only_block_row<TensorType::IQ1_S, BlockIQ1_S, kQK_K, dequantize_row_iq1_s>("iq1_s"),
    read_only_block_row<TensorType::IQ3_S, BlockIQ3_S, kQK_K, dequantize_row_iq3_s>("iq3_s"),
    read_only_block_row<TensorType::IQ2_S, BlockIQ2_S, kQK_K, dequantize_row_iq2_s>("iq2_s"),
    read_only_block_row<TensorType::IQ1_M, BlockIQ1_M, kQK_K, dequantize_row_iq1_m>("iq1_m"),
    // iq4_nl, iq4_xs, mxfp4 (iq4_quants.h): ggml's quantizers, the same bytes as ggml's own
    // on 2^20 values (checked once against a local build of ggml, not in the tests); the
    // tests check mxfp4 and ik_llama.cpp's iq4 search against the frontier files.
    block_row<TensorType::IQ4_NL, BlockIQ4_NL, kQK, dequantize_row_iq4_nl, quantize_row_iq4_nl>(
        "iq4_nl"),
    block_row<TensorType::IQ4_XS, BlockIQ4_XS, kQK_K, dequantize_row_iq4_xs, quantize_row_iq4_xs>(
        "iq4_xs"),
    TypeTraits{TensorType::I8, "i8", 1, 1, &dequantize_cast<int8_t>, nullptr},
    TypeTraits{TensorType::I16, "i16", 1, 2, &dequantize_cast<int16_t>, nullptr},
    TypeTraits{TensorType::I32, "i32", 1, 4, &dequantize_cast<int32_t>, nullptr},
    TypeTraits{TensorType::I64, "i64", 1, 8, &dequantize_cast<int64_t>, nullptr},
    TypeTraits{TensorType::F64, "f64", 1, 8, &dequantize_cast<double>, &quantize_f64},
    TypeTraits{TensorType::BF16, "bf16", 1, 2, &dequantize_bf16, &quantize_bf16},
    block_row<TensorType::MXFP4, BlockMXFP4, kQK, dequantize_row_mxfp4, quantize_row_mxfp4>(
        "mxfp4"),
};

char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

}  // namespace

const TypeTraits* find_type_traits(uint32_t type_id) {
  for (const TypeTraits& row : kTable) {
    if (static_cast<uint32_t>(row.type) == type_id) return &row;
  }
  return nullptr;
}

const TypeTraits& type_traits(TensorType type) {
  const TypeTraits* row = find_type_traits(static_cast<uint32_t>(type));
  HERD_CHECK_MSG(row != nullptr, "type id " + std::to_string(static_cast<uint32_t>(type)));
  return *row;
}

std::optional<TensorType> parse_type_name(std::string_view name) {
  for (const TypeTraits& row : kTable) {
    if (equal_ignoring_case(row.name, name)) return row.type;
  }
  return std::nullopt;
}

size_t row_bytes(TensorType type, int64_t n) {
  const TypeTraits& row = type_traits(type);
  if (n < 0 || n % row.block_size != 0) {
    throw Error("quant", "a row of " + std::to_string(n) + " elements cannot be stored as " +
                             std::string(row.name) + ", whose blocks hold " +
                             std::to_string(row.block_size) + " elements");
  }
  return size_t(n / row.block_size) * row.block_bytes;
}

}  // namespace herd
