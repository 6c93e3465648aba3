#include "gguf/split.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "gguf/writer.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace herd::gguf {
namespace {

namespace fs = std::filesystem;

// A model of n_tensors F32 tensors t0, t1, ... ([4, i + 1], bytes i * 16 + j) and a few keys.
std::string write_model(const fs::path& path, int n_tensors, size_t alignment = 32) {
  Writer w(alignment);
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bc"});
  for (int i = 0; i < n_tensors; ++i) {
    w.add_tensor("t" + std::to_string(i), TensorType::F32, {4, i + 1});
  }
  w.write(path.string(), [](size_t index, std::span<uint8_t> out) {
    for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<uint8_t>(index * 16 + j);
  });
  return path.string();
}

// One file of a split set written by hand: its split keys and its tensors' names.
void write_part(const fs::path& path, int no, int count, int n_tensors,
                const std::vector<std::string>& names) {
  Writer w;
  w.set_u16(kSplitNo, static_cast<uint16_t>(no));
  w.set_u16(kSplitCount, static_cast<uint16_t>(count));
  w.set_i32(kSplitTensorsCount, n_tensors);
  for (const std::string& name : names) w.add_tensor(name, TensorType::F32, {4});
  w.write(path.string(),
          [](size_t, std::span<uint8_t> out) { std::fill(out.begin(), out.end(), 7); });
}

void expect_open_error(const fs::path& path, const std::string& needle) {
  try {
    File::open(path.string());
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[gguf]"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

class SplitTest : public ::testing::Test {
 protected:
  TempDir dir_{"gguf-split", ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  fs::path prefix_ = dir_.path() / "M-Q8_0";
  fs::path part(int n) const {
    char name[32];
    std::snprintf(name, sizeof name, "-%05d-of-00003.gguf", n);
    return prefix_.string() + name;
  }
  // Writes a model of 5 tensors as 3 files (1, 2 and 2 tensors: as write_split shares them).
  File write_set(size_t alignment = 32) {
    File whole = File::open(write_model(dir_.path() / "whole.gguf", 5, alignment));
    const std::vector<std::string> paths = write_split(whole, prefix_.string(), 3);
    EXPECT_EQ(paths, (std::vector<std::string>{part(1), part(2), part(3)}));
    return whole;
  }
};

TEST_F(SplitTest, AnyFileOfTheSetOpensTheWholeModel) {
  const File whole = write_set();
  for (int n = 1; n <= 3; ++n) {
    const File f = File::open(part(n).string());
    EXPECT_EQ(f.n_files(), 3u);
    EXPECT_EQ(f.paths(), (std::vector<std::string>{part(1), part(2), part(3)}));
    EXPECT_EQ(f.origin(), part(1).string());
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 2u);
    // The split keys describe files, not the model: a copy of the metadata leaves them out.
    EXPECT_FALSE(f.has(kSplitCount));
    EXPECT_FALSE(f.has(kSplitNo));
    EXPECT_EQ(f.metadata().size(), whole.metadata().size());
    ASSERT_EQ(f.tensors().size(), 5u);
    for (const TensorInfo& t : whole.tensors()) {
      const TensorInfo& got = f.tensor(t.name);
      EXPECT_EQ(got.shape, t.shape);
      EXPECT_EQ(got.type, t.type);
      EXPECT_TRUE(
          std::equal(got.bytes().begin(), got.bytes().end(), t.bytes().begin(), t.bytes().end()))
          << t.name;
      f.release(got);  // a hint into its own file's mapping
    }
    // Tensors in order, 1 + 2 + 2: each names its file.
    EXPECT_EQ(f.tensor("t0").file, 0u);
    EXPECT_EQ(f.tensor("t1").file, 1u);
    EXPECT_EQ(f.tensor("t2").file, 1u);
    EXPECT_EQ(f.tensor("t4").file, 2u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(f.file_origin(i), part(static_cast<int>(i) + 1).string());
      EXPECT_GT(f.file_header(i).size(), 24u);
    }
  }
}

TEST_F(SplitTest, KeepsTheModelsAlignment) {
  write_set(64);
  const File f = File::open(part(3).string());
  EXPECT_EQ(f.alignment(), 64u);
  for (const TensorInfo& t : f.tensors()) EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
}

TEST_F(SplitTest, OneFileSetIsAPlainFile) {
  File whole = File::open(write_model(dir_.path() / "whole.gguf", 2));
  const std::vector<std::string> paths = write_split(whole, prefix_.string(), 1);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0], prefix_.string() + "-00001-of-00001.gguf");
  const File f = File::open(paths[0]);
  EXPECT_EQ(f.n_files(), 1u);
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.get_i64(kSplitCount), 1);
}

TEST_F(SplitTest, WriteSplitRefusesImpossibleCounts) {
  File whole = File::open(write_model(dir_.path() / "whole.gguf", 2));
  EXPECT_THROW(write_split(whole, prefix_.string(), 3), Error);
  EXPECT_THROW(write_split(whole, prefix_.string(), 0), Error);
}

TEST_F(SplitTest, ParsingBytesDoesNotOpenOtherFiles) {
  write_set();
  const MappedFile bytes = MappedFile::open(part(1).string());
  const File f = File::parse(bytes.bytes(), part(1).string());
  EXPECT_EQ(f.n_files(), 1u);
  EXPECT_EQ(f.get_i64(kSplitCount), 3);
}

TEST_F(SplitTest, MissingFile) {
  write_set();
  fs::remove(part(2));
  expect_open_error(part(1), "missing: file 2 of the 3 of the split model");
  expect_open_error(part(3), "-00002-of-00003.gguf': missing");
  fs::remove(part(1));
  expect_open_error(part(3), "-00001-of-00003.gguf': missing: file 1");
}

TEST_F(SplitTest, FileOfAnotherSet) {
  write_set();
  // Another model's second file (7 tensors in all) under this set's name.
  File other = File::open(write_model(dir_.path() / "other.gguf", 7));
  write_split(other, (dir_.path() / "O").string(), 3);
  fs::copy_file(dir_.path() / "O-00002-of-00003.gguf", part(2),
                fs::copy_options::overwrite_existing);
  expect_open_error(part(1), "split.tensors.count is 7 where the first file's is 5");
}

TEST_F(SplitTest, WrongSplitCount) {
  write_set();
  write_part(part(2), 1, 4, 5, {"t1", "t2"});
  expect_open_error(part(1), "split.count is 4, but it should be file 2 of the 3");
}

TEST_F(SplitTest, SplitNoDisagreesWithTheName) {
  write_set();
  fs::rename(part(2), dir_.path() / "tmp.gguf");
  fs::rename(part(3), part(2));
  fs::rename(dir_.path() / "tmp.gguf", part(3));
  expect_open_error(part(1), "split.no 2 says it is file 3, but its name says it is file 2");
  // Opened itself, a file whose name and keys disagree cannot find the others.
  expect_open_error(part(2), "not named NAME-00003-of-00003.gguf");
}

TEST_F(SplitTest, RenamedFileCannotFindTheOthers) {
  write_set();
  fs::rename(part(1), dir_.path() / "model.gguf");
  expect_open_error(dir_.path() / "model.gguf", "not named NAME-00001-of-00003.gguf");
}

TEST_F(SplitTest, TensorInTwoFiles) {
  write_set();
  write_part(part(3), 2, 3, 5, {"t3", "t0"});
  expect_open_error(part(1), "tensor 't0' is in '" + part(1).string() + "' too");
}

TEST_F(SplitTest, TensorCountDisagrees) {
  write_set();
  write_part(part(3), 2, 3, 5, {"t3"});
  expect_open_error(part(1), "hold 4 tensors, but split.tensors.count says 5");
}

TEST_F(SplitTest, TruncatedFile) {
  write_set();
  fs::resize_file(part(3), fs::file_size(part(3)) - 40);  // past the padding
  expect_open_error(part(1), "-00003-of-00003.gguf': tensor 't4': data");
}

TEST_F(SplitTest, MissingTensorNamesTheSet) {
  write_set();
  const File f = File::open(part(1).string());
  try {
    f.tensor("output.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in none of the 3 files of the split model"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace herd::gguf
