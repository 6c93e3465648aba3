#include "quant/types.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "util/error.h"

namespace herd {
namespace {

using namespace quant;

struct ExpectedRow {
  TensorType type;
  const char* name;
  int64_t block_size;
  size_t block_bytes;
  bool writable;
};

// ggml's numbers (ggml.c type_traits), with the block sizes checked against the structs.
const ExpectedRow kExpected[] = {
    {TensorType::F32, "f32", 1, 4, true},
    {TensorType::F16, "f16", 1, 2, true},
    {TensorType::Q4_0, "q4_0", 32, sizeof(BlockQ4_0), true},
    {TensorType::Q4_1, "q4_1", 32, sizeof(BlockQ4_1), true},
    {TensorType::Q5_0, "q5_0", 32, sizeof(BlockQ5_0), true},
    {TensorType::Q5_1, "q5_1", 32, sizeof(BlockQ5_1), true},
    {TensorType::Q8_0, "q8_0", 32, sizeof(BlockQ8_0), true},
    {TensorType::Q8_1, "q8_1", 32, sizeof(BlockQ8_1), true},
    {TensorType::Q2_K, "q2_K", 256, sizeof(BlockQ2_K), true},
    {TensorType::Q3_K, "q3_K", 256, sizeof(BlockQ3_K), true},
    {TensorType::Q4_K, "q4_K", 256, sizeof(BlockQ4_K), true},
    {TensorType::Q5_K, "q5_K", 256, sizeof(BlockQ5_K), true},
    {TensorType::Q6_K, "q6_K", 256, sizeof(BlockQ6_K), true},
    {TensorType::Q8_K, "q8_K", 256, sizeof(BlockQ8_K), true},
    {TensorType::IQ4_NL, "iq4_nl", 32, sizeof(BlockIQ4_NL), true},
    {TensorType::IQ4_XS, "iq4_xs", 256, sizeof(BlockIQ4_XS), true},
    {TensorType::I8, "i8", 1, 1, false},
    {TensorType::I16, "i16", 1, 2, false},
    {TensorType::I32, "i32", 1, 4, false},
    {TensorType::I64, "i64", 1, 8, false},
    {TensorType::F64, "f64", 1, 8, true},
    {TensorType::BF16, "bf16", 1, 2, true},
    {TensorType::MXFP4, "mxfp4", 32, sizeof(BlockMXFP4), true},
};

TEST(TypeTable, RowsMatchGgml) {
  for (const ExpectedRow& expected : kExpected) {
    SCOPED_TRACE(expected.name);
    const TypeTraits* row = find_type_traits(static_cast<uint32_t>(expected.type));
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->type, expected.type);
    EXPECT_EQ(row->name, expected.name);
    EXPECT_EQ(row->block_size, expected.block_size);
    EXPECT_EQ(row->block_bytes, expected.block_bytes);
    EXPECT_NE(row->dequantize, nullptr);
    EXPECT_EQ(row->quantize != nullptr, expected.writable);
    EXPECT_EQ(&type_traits(expected.type), row);
  }
  // The GGUF ids themselves.
  EXPECT_EQ(uint32_t(TensorType::Q4_K), 12u);
  EXPECT_EQ(uint32_t(TensorType::BF16), 30u);
  EXPECT_EQ(sizeof(BlockQ2_K), 84u);
  EXPECT_EQ(sizeof(BlockQ3_K), 110u);
  EXPECT_EQ(sizeof(BlockQ5_K), 176u);
  EXPECT_EQ(sizeof(BlockQ6_K), 210u);
  EXPECT_EQ(sizeof(BlockQ8_K), 292u);
  EXPECT_EQ(uint32_t(TensorType::IQ4_NL), 20u);
  EXPECT_EQ(uint32_t(TensorType::IQ4_XS), 23u);
  EXPECT_EQ(uint32_t(TensorType::MXFP4), 39u);
  EXPECT_EQ(sizeof(BlockIQ4_NL), 18u);
  EXPECT_EQ(sizeof(BlockIQ4_XS), 136u);
  EXPECT_EQ(sizeof(BlockMXFP4), 17u);
}

TEST(TypeTable, UnknownIdsHaveNoRow) {
  for (uint32_t id : {4u, 5u, 31u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(find_type_traits(id), nullptr) << id;
  }
}

TEST(TypeTable, NamesParseBack) {
  for (const ExpectedRow& expected : kExpected) {
    EXPECT_EQ(parse_type_name(expected.name), expected.type);
    std::string upper = expected.name;
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(parse_type_name(upper), expected.type) << upper;
  }
  EXPECT_EQ(parse_type_name("Q4_k"), TensorType::Q4_K);
  EXPECT_EQ(parse_type_name(""), std::nullopt);
  EXPECT_EQ(parse_type_name("q4"), std::nullopt);
  EXPECT_EQ(parse_type_name("q4_0 "), std::nullopt);
}

TEST(TypeTable, RowBytes) {
  EXPECT_EQ(row_bytes(TensorType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(TensorType::BF16, 3), 6u);
  EXPECT_EQ(row_bytes(TensorType::Q4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(row_bytes(TensorType::Q6_K, 4096), 4096u / 256 * 210);
  EXPECT_EQ(row_bytes(TensorType::Q4_K, 0), 0u);
  EXPECT_THROW(row_bytes(TensorType::Q4_0, 33), Error);
  EXPECT_THROW(row_bytes(TensorType::Q4_K, 128), Error);
  EXPECT_THROW(row_bytes(TensorType::Q8_0, -32), Error);
  try {
    row_bytes(TensorType::Q4_K, 100);
    FAIL() << "expected herd::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[quant] ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
  }
}

TEST(TypeTable, PartialBlocksAreRejected) {
  std::vector<float> values(64, 1.0f);
  std::vector<uint8_t> bytes(1024);
  EXPECT_THROW(type_traits(TensorType::Q4_0).quantize(values.data(), bytes.data(), 33), Error);
  EXPECT_THROW(type_traits(TensorType::Q4_K).dequantize(bytes.data(), values.data(), 32), Error);
}

TEST(TypeTable, PlainTypesConvert) {
  const std::vector<float> values = {0.0f, -1.5f, 3.0f, 65504.0f, 1e-3f};
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::F64}) {
    const TypeTraits& row = type_traits(type);
    std::vector<uint8_t> bytes(row_bytes(type, int64_t(values.size())));
    row.quantize(values.data(), bytes.data(), int64_t(values.size()));
    std::vector<float> back(values.size());
    row.dequantize(bytes.data(), back.data(), int64_t(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(back[i], values[i], std::abs(values[i]) * 4e-3f) << row.name << " " << i;
    }
  }
  // Integer tensors read as floats, from unaligned storage too.
  const int32_t ints[3] = {-7, 0, 123456};
  std::vector<uint8_t> storage(1 + sizeof(ints));
  std::memcpy(storage.data() + 1, ints, sizeof(ints));
  float out[3];
  type_traits(TensorType::I32).dequantize(storage.data() + 1, out, 3);
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 123456.0f);
  const int8_t bytes[2] = {-128, 127};
  type_traits(TensorType::I8).dequantize(bytes, out, 2);
  EXPECT_EQ(out[0], -128.0f);
  EXPECT_EQ(out[1], 127.0f);
}

}  // namespace
}  // namespace herd
