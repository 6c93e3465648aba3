#include "util/split_name.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(SplitName, ParsesLlamaGgufSplitNames) {
  const std::optional<SplitName> s = parse_split_name("dir/Model-Q4_K_M-00002-of-00003.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->prefix, "dir/Model-Q4_K_M");
  EXPECT_EQ(s->part, 2);
  EXPECT_EQ(s->of, 3);
  EXPECT_EQ(s->part_path(1), "dir/Model-Q4_K_M-00001-of-00003.gguf");
  EXPECT_EQ(s->part_path(3), "dir/Model-Q4_K_M-00003-of-00003.gguf");
}

TEST(SplitName, KeepsTheCaseOfTheSuffix) {
  const std::optional<SplitName> s = parse_split_name("M-00001-OF-00002.GGUF");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->part_path(2), "M-00002-OF-00002.GGUF");
}

TEST(SplitName, RejectsOtherNames) {
  EXPECT_FALSE(parse_split_name("Model-Q4_K_M.gguf"));
  EXPECT_FALSE(parse_split_name("M-00000-of-00003.gguf"));  // parts count from 1
  EXPECT_FALSE(parse_split_name("M-00004-of-00003.gguf"));
  EXPECT_FALSE(parse_split_name("M-0001-of-00003.gguf"));  // five digits
  EXPECT_FALSE(parse_split_name("M-00001-of-00003.bin"));
  EXPECT_FALSE(parse_split_name("-00001-of-00003"));
}

TEST(SplitName, ModelStemDropsTheSplitSuffix) {
  EXPECT_EQ(model_stem("dir/M-00001-of-00002.gguf"), "dir/M");
  EXPECT_EQ(model_stem("dir/M.gguf"), "dir/M");
  EXPECT_EQ(model_stem("dir/M.GGUF"), "dir/M");
  EXPECT_EQ(model_stem("README.md"), "README.md");
}

}  // namespace
}  // namespace herd
