#include "util/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "util/error.h"

namespace herd {
namespace {

TEST(MappedFile, MapsWholeFile) {
  std::string path = testing::TempDir() + "/mapped_file_test.bin";
  { std::ofstream(path, std::ios::binary) << "hello"; }
  MappedFile file = MappedFile::open(path);
  ASSERT_EQ(file.size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), 5), "hello");
  MappedFile moved = std::move(file);
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_EQ(file.size(), 0u);
  std::remove(path.c_str());
}

TEST(MappedFile, MissingFileNamesPath) {
  try {
    MappedFile::open("/nonexistent/herd.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[io] cannot open '/nonexistent/herd.gguf'"),
              std::string::npos);
  }
}

TEST(Check, ThrowsWithCondition) {
  try {
    HERD_CHECK_MSG(1 + 1 == 3, "arith");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 + 1 == 3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("arith"), std::string::npos);
  }
}

}  // namespace
}  // namespace herd
