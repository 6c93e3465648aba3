// The tensor-type table: one row per GGUF tensor type (block size, bytes per block,
// dequantize, quantize). Adding a type adds a row; nothing else branches on the type.
// Type ids are GGUF's (ggml_type), so a file's tensor type indexes this table directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace herd {

// GGUF tensor type ids (ggml_type). Only ids with a row in the table are supported.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,
};

struct TypeTraits {
  TensorType type;
  std::string_view name;  // lower-case as in GGUF tooling: "f32", "q4_0", "q4_K"
  int64_t block_size;     // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
  // dst[0..n) = values of the n elements at src. REQUIRES: n % block_size == 0.
  void (*dequantize)(const void* src, float* dst, int64_t n);
  // dst = n elements of src encoded in this type, bit-exact with the GGUF ecosystem's
  // reference quantizer. REQUIRES: n % block_size == 0. nullptr when the type cannot be
  // written (e.g. integer types).
  void (*quantize)(const float* src, void* dst, int64_t n);
};

// The row of a GGUF type id, or nullptr when herd does not know the id.
const TypeTraits* find_type_traits(uint32_t type_id);
// The row of a known type (never null).
const TypeTraits& type_traits(TensorType type);
// Parses a type name, case-insensitive ("q4_0", "Q4_K", "bf16"); nullopt when unknown.
std::optional<TensorType> parse_type_name(std::string_view name);

// Bytes of a row of n elements; throws herd::Error("[quant] ...") when n is not a
// multiple of the block size.
size_t row_bytes(TensorType type, int64_t n);

}  // namespace herd
