#include "cluster/local_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cluster/weight_cache.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kModel = "../shared/models/llama-q4_0.gguf";

void copy_to(const fs::path& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::perms::owner_write, fs::perm_options::add);  // shared/ is read-only
}

TEST(LocalModelTest, FindsTheNamedFileInTheNodesOwnStoreAtTheCoordinatorsSize) {
  const TempDir dir("local-model", "own");
  const fs::path root = dir.path() / "store", nas = dir.path() / "nas";
  const store::Store own(root, {nas});
  const uint64_t size = fs::file_size(kModel);
  const net::StoreName name{"org/repo", "Q4_0/m-Q4_0.gguf", size};
  EXPECT_FALSE(find_own_copy(own, name));
  copy_to(kModel, root / "org/repo/Q4_0/m-Q4_0.gguf");
  EXPECT_EQ(find_own_copy(own, name), root / "org/repo/Q4_0/m-Q4_0.gguf");
  EXPECT_FALSE(find_own_copy(own, net::StoreName{"org/repo", name.file, size + 1}));
  EXPECT_FALSE(find_own_copy(own, net::StoreName{"not a repo", name.file, size}));
  EXPECT_FALSE(find_own_copy(own, net::StoreName{"org/repo:Q4_0", name.file, size}));
  // A path's base name: the read-only folders only.
  EXPECT_FALSE(find_own_copy(own, net::StoreName{"", "m-Q4_0.gguf", size}));
  copy_to(kModel, nas / "m-Q4_0.gguf");
  EXPECT_EQ(find_own_copy(own, net::StoreName{"", "m-Q4_0.gguf", size}), nas / "m-Q4_0.gguf");
}

// The node maps its own copy only when the content hash is the coordinator's; another model
// under the same name and size is logged and passed over for the hinted file, else nothing.
TEST(LocalModelTest, MapsItsOwnCopyOnlyWhenTheContentHashMatches) {
  const TempDir dir("local-model", "hash");
  const fs::path root = dir.path() / "store", cache = dir.path() / "cache";
  const fs::path own_file = root / "org/repo/m.gguf";
  copy_to(kModel, own_file);
  std::string log;
  const net::LogFn log_fn = [&log](std::string_view line) { log += std::string(line) + "\n"; };
  net::Load request;
  request.model_hash = model_content_hash({kModel.string()}, cache);
  request.store_name = net::StoreName{"org/repo", "m.gguf", fs::file_size(kModel)};
  const std::optional<store::Store> own = store::Store(root, {});

  std::optional<LocalModelFile> got = find_local_model(request, own, cache, log_fn);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->path, own_file);
  EXPECT_THAT(got->source, HasSubstr("this node's store"));
  EXPECT_FALSE(find_local_model(request, std::nullopt, cache, log_fn));  // no store looked in

  // The same name and size, other bytes (the last byte of tensor data flipped).
  {
    std::fstream f(own_file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char c = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(-1, std::ios::end);
    f.put(c);
  }
  fs::last_write_time(own_file, fs::last_write_time(own_file) + std::chrono::seconds(2));
  EXPECT_FALSE(find_local_model(request, own, cache, log_fn));
  EXPECT_THAT(log, HasSubstr("not using this node's copy " + own_file.string() +
                             ": another model (content hash)"));
  request.model_path_hint = fs::absolute(kModel).string();
  got = find_local_model(request, own, cache, log_fn);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->path, fs::path(request.model_path_hint));
  EXPECT_EQ(got->source, "the model file");
}

}  // namespace
}  // namespace herd::cluster
