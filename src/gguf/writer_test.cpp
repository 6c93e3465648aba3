#include "gguf/writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/reader.h"
#include "gguf/test_file.h"
#include "util/error.h"

namespace herd::gguf {
namespace testing {

std::vector<uint8_t> write_small_file(const std::string& path) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_i32("test.negative", -7);
  w.set_u64("test.big", 1ull << 40);
  w.set_f32("test.eps", 1e-5f);
  w.set_bool("test.flag", true);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bc", ""});
  std::vector<float> scores = {0.5f, -1.0f, 2.0f};
  w.set_f32_array("tokenizer.ggml.scores", scores);
  std::vector<int32_t> types = {1, 3, 6};
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.add_tensor("weight", TensorType::F32, {3, 2});
  w.add_tensor("quant", TensorType::Q8_0, {32});
  w.write(path, [](size_t index, std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(index * 100 + i);
  });
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace testing

namespace {

TEST(Writer, RoundTripsThroughReader) {
  std::string path = ::testing::TempDir() + "/writer_roundtrip.gguf";
  testing::write_small_file(path);
  File f = File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(f.get_i64("test.negative"), -7);
  EXPECT_THROW(f.get_u64("test.negative"), Error);
  EXPECT_EQ(f.get_u64("test.big"), 1ull << 40);
  EXPECT_FLOAT_EQ(f.get_f32("test.eps"), 1e-5f);
  EXPECT_TRUE(f.get_bool("test.flag"));
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[1], "bc");
  EXPECT_EQ(tokens[2], "");
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0.5f, -1.0f, 2.0f}));
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{1, 3, 6}));

  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo& w = f.tensor("weight");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(w.n_bytes, 24u);
  EXPECT_EQ(w.n_rows(), 2);
  EXPECT_EQ(w.data[5], 5);
  const TensorInfo& q = f.tensor("quant");
  EXPECT_EQ(q.type, TensorType::Q8_0);
  EXPECT_EQ(q.n_bytes, 34u);
  EXPECT_EQ(q.offset % 32, 0u);
  EXPECT_EQ(q.data[0], 100);
  EXPECT_EQ(q.data[33], 133);
}

TEST(Writer, BoolArraysAreBoolsOnDisk) {
  // Gemma 4's sliding_window_pattern is a bool array, as its converter writes it.
  std::string path = ::testing::TempDir() + "/writer_bools.gguf";
  Writer w;
  const std::vector<uint8_t> pattern = {1, 0, 7, 0};
  w.set_bool_array("test.pattern", pattern);
  w.write(path, [](size_t, std::span<uint8_t>) {});
  File f = File::open(path);
  const Value* v = f.find("test.pattern");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->elem_type, ValueType::BOOL);
  EXPECT_EQ(f.get_i32_array("test.pattern"), (std::vector<int32_t>{1, 0, 1, 0}));
}

TEST(Writer, SettingAKeyTwiceReplacesIt) {
  std::string path = ::testing::TempDir() + "/writer_replace.gguf";
  Writer w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_u32("a", 2);
  w.write(path, [](size_t, std::span<uint8_t>) {});
  File f = File::open(path);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].first, "a");
  EXPECT_EQ(f.get_u32("a"), 2u);
}

TEST(Writer, RejectsShapeThatBreaksBlocks) {
  Writer w;
  EXPECT_THROW(w.add_tensor("t", TensorType::Q4_0, {33}), Error);
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {0, 2}), Error);
}

TEST(Writer, FailedFillLeavesNoFile) {
  std::string path = ::testing::TempDir() + "/writer_failed.gguf";
  std::remove(path.c_str());
  Writer w;
  w.add_tensor("t", TensorType::F32, {4});
  EXPECT_THROW(
      w.write(path, [](size_t, std::span<uint8_t>) { throw Error("test", "fill failed"); }), Error);
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

}  // namespace
}  // namespace herd::gguf
