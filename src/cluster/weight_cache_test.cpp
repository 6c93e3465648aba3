// How a model is known to nodes: the content hash of its file, or of a split model's files.
#include "cluster/weight_cache.h"

#include <gtest/gtest.h>

#include <fstream>

#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

TEST(WeightCache, ASplitModelIsKnownByAllOfItsFilesInOrder) {
  const TempDir dir("weight-cache-test", "split");
  const std::string a = (dir.path() / "M-00001-of-00002.gguf").string();
  const std::string b = (dir.path() / "M-00002-of-00002.gguf").string();
  std::ofstream(a) << "first";
  std::ofstream(b) << "second";
  const std::filesystem::path cache = dir.path() / "cache";
  EXPECT_EQ(model_content_hash({a}, cache), file_content_hash(a, cache));
  const net::ContentHash both = model_content_hash({a, b}, cache);
  EXPECT_NE(both, file_content_hash(a, cache));
  EXPECT_NE(both, model_content_hash({b, a}, cache));
  EXPECT_EQ(both, model_content_hash({a, b}, ""));  // remembered or not, the same
  std::ofstream(b) << "second, changed";
  EXPECT_NE(model_content_hash({a, b}, ""), both);
}

}  // namespace
}  // namespace herd::cluster
