#include "hub/pod_loads.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace herd::hub {
namespace {

TEST(PodLoadsTest, TheDirsGgufFilesAreTheLoadableModels) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("herd_models_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub.gguf");  // a directory: not a model
  for (const char* f : {"b.gguf", "a-q4_0.gguf", "notes.txt", "c.gguf.part",
                        "s-00001-of-00002.gguf", "s-00002-of-00002.gguf"}) {
    std::ofstream(dir / f) << "x";
  }
  const ModelDir d = list_model_dir(dir.string());
  // A split model once, by its first file, named without the suffix.
  EXPECT_EQ(d.names(), (std::vector<std::string>{"a-q4_0", "b", "s"}));
  EXPECT_EQ(d.models.at("b"), (dir / "b.gguf").string());
  EXPECT_EQ(d.models.at("s"), (dir / "s-00001-of-00002.gguf").string());
  EXPECT_TRUE(d.skipped.empty());
  for (int i = 0; i < 70; ++i)
    std::ofstream(dir / ("m" + std::to_string(100 + i) + ".gguf")) << "x";
  const ModelDir many = list_model_dir(dir.string());
  EXPECT_EQ(many.models.size(), kMaxLoadable);
  EXPECT_EQ(many.skipped.size(), 73u - kMaxLoadable);
  EXPECT_THROW(list_model_dir((dir / "nope").string()), Error);
  fs::remove_all(dir);
}

TEST(PodLoadsTest, OnlyTheHubsTokenIsAccepted) {
  EXPECT_EQ(check_control_token("Bearer s3cret", "s3cret"), 0);
  EXPECT_EQ(check_control_token("", "s3cret"), 401);
  EXPECT_EQ(check_control_token("Basic s3cret", "s3cret"), 401);
  EXPECT_EQ(check_control_token("Bearer s3creT", "s3cret"), 403);
  EXPECT_EQ(check_control_token("Bearer s3cre", "s3cret"), 403);
  EXPECT_EQ(check_control_token("Bearer ", ""), 403);  // not registered yet: no token at all
}

}  // namespace
}  // namespace herd::hub
