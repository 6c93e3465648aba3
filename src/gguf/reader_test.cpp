#include "gguf/reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <unistd.h>

#include "gguf/test_file.h"
#include "util/error.h"

namespace herd::gguf {
namespace {

// ctest runs the tests of this file as parallel processes: each writes its own copy.
std::vector<uint8_t> small_file() {
  const std::string path =
      ::testing::TempDir() + "/reader_small_" + std::to_string(getpid()) + ".gguf";
  std::vector<uint8_t> bytes = testing::write_small_file(path);
  std::remove(path.c_str());
  return bytes;
}

// Expects parsing to fail with a herd::Error whose message contains `needle`.
void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    File::parse(bytes, "test.gguf");
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("[gguf]"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

// Offset of the first occurrence of `text` in bytes (for patching fields in tests).
size_t find_bytes(const std::vector<uint8_t>& bytes, const std::string& text) {
  auto it = std::search(bytes.begin(), bytes.end(), text.begin(), text.end());
  HERD_CHECK(it != bytes.end());
  return static_cast<size_t>(it - bytes.begin());
}

template <typename T>
void poke(std::vector<uint8_t>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

TEST(Reader, ReadsSharedModel) {
  File f = File::open("../shared/models/llama-q4_0.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 256u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 384u);
  const TensorInfo& q = f.tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q.type, TensorType::Q4_0);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(q.n_bytes, 256u * 256 / 32 * 18);
  EXPECT_EQ(f.tensor("blk.1.attn_norm.weight").type, TensorType::F32);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied output
  // Every tensor's data lies inside the file.
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_GE(t.data, f.bytes().data() + f.data_offset());
    EXPECT_LE(t.data + t.n_bytes, f.bytes().data() + f.bytes().size());
  }
}

TEST(Reader, ReadsEverySharedFile) {
  for (const char* name :
       {"llama-f16", "llama-bf16", "llama-q8_0", "llama-q4_1", "llama-q5_0", "llama-q4_k",
        "llama-q6_k", "llama-q4_k_m", "llama3r-f32", "qwen2-f16", "qwen3-f32", "qwen3moe-f16"}) {
    File f = File::open(std::string("../shared/models/") + name + ".gguf");
    EXPECT_GT(f.tensors().size(), 10u) << name;
  }
  File vocab = File::open("../shared/vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_EQ(vocab.tensors().size(), 0u);
  EXPECT_EQ(vocab.get_string_array("tokenizer.ggml.merges").size(), 280147u);
}

TEST(Reader, MissingAndMistypedKeysNameTheKey) {
  File f = File::open("../shared/models/llama-q4_0.gguf");
  EXPECT_THROW(f.get_string("no.such.key"), Error);
  try {
    f.get_string("llama.block_count");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama.block_count' is u32, expected a string"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.tensor("blk.9.attn_q.weight"), Error);
  EXPECT_FALSE(f.get_u64_opt("no.such.key").has_value());
}

TEST(Reader, BadMagic) {
  auto bytes = small_file();
  bytes[0] = 'X';
  expect_error(bytes, "bad magic");
}

TEST(Reader, UnsupportedVersion) {
  auto bytes = small_file();
  poke<uint32_t>(bytes, 4, 7);
  expect_error(bytes, "unsupported GGUF version 7");
  poke<uint32_t>(bytes, 4, 2);  // v2 has the same layout
  EXPECT_NO_THROW(File::parse(bytes));
}

TEST(Reader, TruncatedHeader) {
  expect_error({'G', 'G', 'U', 'F', 3, 0}, "truncated");
}

TEST(Reader, HugeCountsAreRejectedBeforeAllocating) {
  auto bytes = small_file();
  poke<uint64_t>(bytes, 16, 1ull << 60);  // n_kv
  expect_error(bytes, "metadata entries cannot fit");
  bytes = small_file();
  poke<uint64_t>(bytes, 8, 1ull << 60);  // n_tensors
  expect_error(bytes, "tensors cannot fit");
}

TEST(Reader, StringLengthPastEnd) {
  auto bytes = small_file();
  // The first key's length field follows the 24-byte header.
  poke<uint64_t>(bytes, 24, 1ull << 40);
  expect_error(bytes, "string length 1099511627776");
}

TEST(Reader, ArrayLengthPastEnd) {
  auto bytes = small_file();
  size_t key = find_bytes(bytes, "tokenizer.ggml.scores");
  // key | u32 type (array) | u32 element type | u64 count
  poke<uint64_t>(bytes, key + std::strlen("tokenizer.ggml.scores") + 8, 1ull << 62);
  expect_error(bytes, "array length");
}

TEST(Reader, UnknownValueType) {
  auto bytes = small_file();
  size_t key = find_bytes(bytes, "test.flag");
  poke<uint32_t>(bytes, key + std::strlen("test.flag"), 99);
  expect_error(bytes, "unknown value type 99");
}

// Patches a field of the tensor entry `name`: field_offset counts bytes after the name.
void poke_tensor(std::vector<uint8_t>& bytes, const std::string& name, size_t field_offset,
                 uint64_t value, size_t width) {
  size_t at = find_bytes(bytes, name) + name.size() + field_offset;
  if (width == 4) {
    poke<uint32_t>(bytes, at, static_cast<uint32_t>(value));
  } else {
    poke<uint64_t>(bytes, at, value);
  }
}

// Tensor "quant" (1 dim): name | u32 n_dims @0 | u64 ne0 @4 | u32 type @12 | u64 offset @16
TEST(Reader, UnknownTensorType) {
  auto bytes = small_file();
  poke_tensor(bytes, "quant", 12, 77, 4);
  expect_error(bytes, "tensor 'quant': unknown type 77");
}

TEST(Reader, MisalignedOffset) {
  auto bytes = small_file();
  poke_tensor(bytes, "quant", 16, 33, 8);
  expect_error(bytes, "not a multiple of the alignment");
}

TEST(Reader, TensorDataOutOfBounds) {
  auto bytes = small_file();
  poke_tensor(bytes, "quant", 16, 1 << 20, 8);
  expect_error(bytes, "beyond file size");
}

TEST(Reader, ShapeOverflow) {
  auto bytes = small_file();
  // "weight" has 2 dims: name | u32 n_dims @0 | u64 ne0 @4 | u64 ne1 @12
  poke_tensor(bytes, "weight", 4, 1ull << 40, 8);
  poke_tensor(bytes, "weight", 12, 1ull << 40, 8);
  expect_error(bytes, "shape overflows");
}

TEST(Reader, TooManyDimensions) {
  auto bytes = small_file();
  poke_tensor(bytes, "weight", 0, 9, 4);
  expect_error(bytes, "9 dimensions");
}

TEST(Reader, BlockSizeMismatch) {
  auto bytes = small_file();
  poke_tensor(bytes, "quant", 4, 31, 8);
  expect_error(bytes, "not a multiple of the q8_0 block size 32");
}

TEST(Reader, EveryTruncationIsAnError) {
  auto bytes = small_file();
  // Cutting the file anywhere before the end of the last tensor's data must fail cleanly.
  for (size_t n = 0; n + 32 < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_THROW(File::parse(cut), Error) << "cut at " << n;
  }
}

TEST(Reader, RandomCorruptionNeverCrashes) {
  auto bytes = small_file();
  std::mt19937 rng(42);
  int errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto copy = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
    try {
      File f = File::parse(copy);
      for (const TensorInfo& t : f.tensors()) {
        ASSERT_LE(t.data + t.n_bytes, copy.data() + copy.size());
      }
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace herd::gguf
