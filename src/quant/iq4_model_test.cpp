// iq4_nl, iq4_xs and mxfp4 quantizers against files made by the reference's llama-quantize
// (ik_llama.cpp 8337e4cd3, see ../shared/models/frontier/README.md):
// - llama-iq4_nl / llama-iq4_xs quantize the same f32 llama weights as the files in
//   ../shared/models; testdata/llama_f32_rows.bin holds the first rows of four of those
//   tensors (recipe in model_quants_test.cpp).
// - gpt-oss-mxfp4 quantizes the expert tensors of gpt-oss-f32, which is shipped whole.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "quant/iq4_quants.h"
#include "quant/types.h"
#include "util/mapped_file.h"

namespace herd {
namespace {

using namespace quant;

const std::string kFrontier = "../shared/models/frontier/";

struct Segment {
  std::string tensor;
  int64_t n_rows;  // the first n_rows rows of the tensor
  int64_t row_length;
  std::vector<float> values;  // [n_rows][row_length]
};

// The layout of testdata/llama_f32_rows.bin (as model_quants_test.cpp reads it).
std::vector<Segment> load_original_rows() {
  std::vector<Segment> segments = {{"token_embd.weight", 8, 256, {}},
                                   {"blk.0.attn_q.weight", 8, 256, {}},
                                   {"blk.1.attn_v.weight", 8, 256, {}},
                                   {"blk.1.ffn_down.weight", 4, 512, {}}};
  const std::string bytes = read_file("src/quant/testdata/llama_f32_rows.bin");
  size_t offset = 0;
  for (Segment& segment : segments) {
    segment.values.resize(size_t(segment.n_rows * segment.row_length));
    const size_t size = segment.values.size() * sizeof(float);
    if (offset + size > bytes.size()) break;
    std::memcpy(segment.values.data(), bytes.data() + offset, size);
    offset += size;
  }
  EXPECT_EQ(offset, bytes.size());
  return segments;
}

template <typename Block>
std::vector<uint8_t> as_bytes(const std::vector<Block>& blocks) {
  std::vector<uint8_t> bytes(blocks.size() * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

// Quantizes a segment row by row, as llama-quantize does, with ik_llama.cpp's search.
std::vector<uint8_t> quantize_ik(TensorType type, const Segment& s) {
  const int64_t n = s.n_rows * s.row_length;
  if (type == TensorType::IQ4_NL) {
    std::vector<BlockIQ4_NL> blocks(size_t(n / kQK));
    quantize_row_iq4_nl(s.values.data(), blocks.data(), n, Iq4Search::kIkLlama);
    return as_bytes(blocks);
  }
  std::vector<BlockIQ4_XS> blocks(size_t(n / kQK_K));
  quantize_row_iq4_xs(s.values.data(), blocks.data(), n, Iq4Search::kIkLlama);
  return as_bytes(blocks);
}

class Iq4File : public ::testing::TestWithParam<const char*> {};

TEST_P(Iq4File, OriginalRowsReproduceTheFileBytes) {
  const gguf::File file = gguf::File::open(kFrontier + GetParam());
  for (const Segment& segment : load_original_rows()) {
    SCOPED_TRACE(segment.tensor);
    const gguf::TensorInfo& tensor = file.tensor(segment.tensor);
    ASSERT_EQ(tensor.shape[0], segment.row_length);
    const std::vector<uint8_t> ours = quantize_ik(tensor.type, segment);
    ASSERT_LE(ours.size(), tensor.n_bytes);
    const std::vector<uint8_t> theirs(tensor.data, tensor.data + ours.size());
    const size_t block_bytes = type_traits(tensor.type).block_bytes;
    int64_t same = 0, total = 0;
    for (size_t b = 0; b < ours.size(); b += block_bytes, ++total) {
      same += std::memcmp(ours.data() + b, theirs.data() + b, block_bytes) == 0;
    }
    EXPECT_EQ(same, total) << type_traits(tensor.type).name;
  }
}

INSTANTIATE_TEST_SUITE_P(Frontier, Iq4File,
                         ::testing::Values("llama-iq4_nl.gguf", "llama-iq4_xs.gguf"));

TEST(Mxfp4File, ExpertTensorsReproduceTheFileBytes) {
  const gguf::File f32 = gguf::File::open(kFrontier + "gpt-oss-f32.gguf");
  const gguf::File file = gguf::File::open(kFrontier + "gpt-oss-mxfp4.gguf");
  int checked = 0;
  for (const gguf::TensorInfo& tensor : file.tensors()) {
    if (tensor.type != TensorType::MXFP4) continue;
    SCOPED_TRACE(std::string(tensor.name));
    const gguf::TensorInfo& original = f32.tensor(tensor.name);
    ASSERT_EQ(original.type, TensorType::F32);
    ASSERT_EQ(original.n_elements, tensor.n_elements);
    std::vector<float> values(static_cast<size_t>(original.n_elements));
    std::memcpy(values.data(), original.data, values.size() * sizeof(float));
    std::vector<uint8_t> ours(row_bytes(TensorType::MXFP4, original.n_elements));
    type_traits(TensorType::MXFP4).quantize(values.data(), ours.data(), original.n_elements);
    ASSERT_EQ(ours.size(), tensor.n_bytes);
    EXPECT_EQ(std::memcmp(ours.data(), tensor.data, ours.size()), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 6);  // gate, up, down experts of 2 layers
}

}  // namespace
}  // namespace herd
