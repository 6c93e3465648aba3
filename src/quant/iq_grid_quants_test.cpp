// The grid-based types' dequantization against the reference's, bit for bit.
//
// Fixtures: src/quant/testdata/iq_grid_<type>.bin = 4 blocks of random bytes (block 1 all
// 0xff: the largest indices, scales and sign bits; the f16 scale of each block set to a
// finite value: 1, 0.5, then random), followed by the 4 x 256 float32 values that gguf-py's
// quants.dequantize gives for them. gguf-py was ik_llama.cpp's at commit 8337e4cd3 (the
// build that made ../shared/models/frontier), run with Debian's python3-numpy:
//   git --git-dir=<ik_llama.cpp mirror> archive HEAD gguf-py/gguf | tar -x -C /tmp/qg
//   then, per type: blocks = default_rng(20261201).integers(0, 256, (4, type_size), uint8)
//   (types in the order below, one generator), d fields set as above, and
//   quants.dequantize(blocks.reshape(1, -1), GGMLQuantizationType.<TYPE>) written after them.
// gguf-py decodes its own copies of the grids (hex strings of 2- and 3-bit codes), so this
// also checks iq_grids.cpp against an independent transcription.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "quant/iq_grid_quants.h"
#include "quant/types.h"

namespace herd {
namespace {

using namespace quant;

struct GridType {
  TensorType type;
  const char* name;
  size_t block_bytes;
};

const GridType kGridTypes[] = {
    {TensorType::IQ2_XXS, "iq2_xxs", sizeof(BlockIQ2_XXS)},
    {TensorType::IQ2_XS, "iq2_xs", sizeof(BlockIQ2_XS)},
    {TensorType::IQ2_S, "iq2_s", sizeof(BlockIQ2_S)},
    {TensorType::IQ3_XXS, "iq3_xxs", sizeof(BlockIQ3_XXS)},
    {TensorType::IQ3_S, "iq3_s", sizeof(BlockIQ3_S)},
    {TensorType::IQ1_S, "iq1_s", sizeof(BlockIQ1_S)},
    {TensorType::IQ1_M, "iq1_m", sizeof(BlockIQ1_M)},
};

TEST(IqGridTypes, TableRows) {
  // ggml's type sizes (ggml.c type_traits) and GGUF ids.
  EXPECT_EQ(sizeof(BlockIQ2_XXS), 66u);
  EXPECT_EQ(sizeof(BlockIQ2_XS), 74u);
  EXPECT_EQ(sizeof(BlockIQ2_S), 82u);
  EXPECT_EQ(sizeof(BlockIQ3_XXS), 98u);
  EXPECT_EQ(sizeof(BlockIQ3_S), 110u);
  EXPECT_EQ(sizeof(BlockIQ1_S), 50u);
  EXPECT_EQ(sizeof(BlockIQ1_M), 56u);
  const uint32_t ids[] = {16, 17, 22, 18, 21, 19, 29};
  for (size_t i = 0; i < std::size(kGridTypes); ++i) {
    const GridType& t = kGridTypes[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(uint32_t(t.type), ids[i]);
    const TypeTraits* row = find_type_traits(ids[i]);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->name, t.name);
    EXPECT_EQ(row->block_size, 256);
    EXPECT_EQ(row->block_bytes, t.block_bytes);
    EXPECT_NE(row->dequantize, nullptr);
    EXPECT_EQ(row->quantize, nullptr);  // read-only types
    EXPECT_EQ(parse_type_name(t.name), t.type);
  }
}

TEST(IqGridTypes, DequantizeMatchesReferenceBitForBit) {
  for (const GridType& t : kGridTypes) {
    SCOPED_TRACE(t.name);
    const std::string path = std::string("src/quant/testdata/iq_grid_") + t.name + ".bin";
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << "missing fixture " << path << " (run from the repository root)";
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    constexpr int64_t kBlocks = 4;
    ASSERT_EQ(bytes.size(), kBlocks * (t.block_bytes + 256 * sizeof(float)));
    std::vector<float> expected(kBlocks * 256);  // [4 blocks][256]
    std::memcpy(expected.data(), bytes.data() + kBlocks * t.block_bytes,
                expected.size() * sizeof(float));
    std::vector<float> got(expected.size());
    type_traits(t.type).dequantize(bytes.data(), got.data(), int64_t(got.size()));
    int mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &expected[i], 4);
      if (a != b && ++mismatches <= 5) {
        ADD_FAILURE() << "element " << i << ": " << got[i] << " vs reference " << expected[i];
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// The integer form the kernels use gives the same values: x = d * scale * q.
TEST(IqGridTypes, DecodedIntsAreInRange) {
  std::vector<uint8_t> block(128, 0xff);
  block[0] = 0x00;
  block[1] = 0x3c;  // f16 1.0 where the type has a d field first
  GridInts ints;
  decode_iq2_xxs(*reinterpret_cast<const BlockIQ2_XXS*>(block.data()), ints);
  EXPECT_EQ(ints.d, 0.125f);
  EXPECT_EQ(ints.scale[0], 31);
  decode_iq3_xxs(*reinterpret_cast<const BlockIQ3_XXS*>(block.data()), ints);
  EXPECT_EQ(ints.d, 0.25f);
  for (int8_t q : ints.q) EXPECT_LE(std::abs(int(q)), 62);
  decode_iq1_s(*reinterpret_cast<const BlockIQ1_S*>(block.data()), ints);
  for (int8_t q : ints.q) EXPECT_LE(std::abs(int(q)), 9);
}

}  // namespace
}  // namespace herd
