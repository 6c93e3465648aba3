#include "store/store.h"

#include <gtest/gtest.h>

#include <fstream>

#include "util/error.h"
#include "util/temp_dir.h"

namespace herd::store {
namespace {

void write(const fs::path& p, size_t size) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << std::string(size, 'x');
}

ModelName name(const std::string& text) {
  return parse_model_name(text).value();
}

TEST(StoreRoot, FromTheEnvironment) {
  EXPECT_EQ(default_root("/m", "/x", "/h"), fs::path("/m"));
  EXPECT_EQ(default_root(nullptr, "/x", "/h"), fs::path("/x/herd/models"));
  EXPECT_EQ(default_root("", "", "/h"), fs::path("/h/.local/share/herd/models"));
  EXPECT_THROW(default_root(nullptr, nullptr, nullptr), Error);
  EXPECT_EQ(parse_path_list("/a::/b:"), (std::vector<fs::path>{"/a", "/b"}));
  EXPECT_TRUE(parse_path_list("").empty());
}

TEST(Store, FindsCopiesInTheStoreThenExtraFolders) {
  TempDir dir("store", "copies");
  const fs::path root = dir.path() / "store", nas = dir.path() / "nas", hf = dir.path() / "hf";
  Store store(root, {nas, hf});
  const ModelName n = name("org/repo:Q8_0");
  const RepoFile f{"sub/M-Q8_0.gguf", 10, ""};
  EXPECT_EQ(store.store_path(n, f), root / "org/repo/sub/M-Q8_0.gguf");
  EXPECT_FALSE(store.find_copy(n, f));
  write(nas / "M-Q8_0.gguf", 9);  // by name, but the wrong size
  EXPECT_FALSE(store.find_copy(n, f));
  write(hf / "models--org--repo/snapshots/abc123/sub/M-Q8_0.gguf", 10);
  EXPECT_EQ(store.find_copy(n, f), hf / "models--org--repo/snapshots/abc123/sub/M-Q8_0.gguf");
  write(nas / "M-Q8_0.gguf", 10);
  EXPECT_EQ(store.find_copy(n, f), nas / "M-Q8_0.gguf");
  write(nas / "org/repo/sub/M-Q8_0.gguf", 10);
  EXPECT_EQ(store.find_copy(n, f), nas / "org/repo/sub/M-Q8_0.gguf");
  write(root / "org/repo/sub/M-Q8_0.gguf", 10);
  EXPECT_EQ(store.find_copy(n, f), root / "org/repo/sub/M-Q8_0.gguf");
}

TEST(Store, FindsAFileByItsNameAloneInTheExtraFolders) {
  TempDir dir("store", "by_name");
  const fs::path root = dir.path() / "store", nas = dir.path() / "nas", hf = dir.path() / "hf";
  Store store(root, {nas, hf});
  const RepoFile f{"m.gguf", 10, ""};
  write(root / "m.gguf", 10);  // the store keeps org/repo/...: a loose file is not its own
  EXPECT_FALSE(store.find_by_file_name(f));
  write(nas / "m.gguf", 9);  // the wrong size
  EXPECT_FALSE(store.find_by_file_name(f));
  write(hf / "m.gguf", 10);
  EXPECT_EQ(store.find_by_file_name(f), hf / "m.gguf");
  EXPECT_EQ(store.find_by_file_name(RepoFile{"sub/m.gguf", 10, ""}), hf / "m.gguf");
}

TEST(Store, FindLocalPicksWithoutTheNetwork) {
  TempDir dir("store", "local");
  const fs::path root = dir.path() / "store", nas = dir.path() / "nas";
  Store store(root, {nas});
  EXPECT_FALSE(store.find_local(name("org/repo")));
  write(nas / "org/repo/M-Q8_0.gguf", 5);
  std::optional<LocalModel> local = store.find_local(name("org/repo:q8_0"));
  ASSERT_TRUE(local);
  EXPECT_FALSE(local->in_store);
  EXPECT_EQ(local->paths.at(0), nas / "org/repo/M-Q8_0.gguf");
  write(root / "org/repo/M-Q4_K_M.gguf", 5);
  write(root / "org/repo/M-Q8_0.gguf.partial", 3);  // not a model yet
  local = store.find_local(name("org/repo"));
  ASSERT_TRUE(local);
  EXPECT_TRUE(local->in_store);
  EXPECT_EQ(local->paths.at(0), root / "org/repo/M-Q4_K_M.gguf");
  EXPECT_EQ(store.find_local(name("org/repo:Q8_0"))->paths.at(0), nas / "org/repo/M-Q8_0.gguf");
  EXPECT_FALSE(store.find_local(name("org/repo:Q2_K")));
  // A split model counts only with every part.
  write(root / "org/repo/S-Q6_K-00001-of-00002.gguf", 5);
  EXPECT_FALSE(store.find_local(name("org/repo:Q6_K")));
  write(root / "org/repo/S-Q6_K-00002-of-00002.gguf", 5);
  local = store.find_local(name("org/repo:Q6_K"));
  ASSERT_TRUE(local);
  EXPECT_EQ(local->paths.size(), 2u);
}

TEST(Store, ListsAndRemoves) {
  TempDir dir("store", "ls");
  const fs::path root = dir.path() / "store";
  Store store(root, {});
  EXPECT_TRUE(store.list().empty());  // no store yet: nothing, not an error
  write(root / "a/one/One-Q4_K_M.gguf", 10);
  write(root / "a/one/One-Q8_0.gguf", 20);
  write(root / "a/one/One-F16.gguf.partial", 7);
  write(root / "b/two/Q2_K/Two-Q2_K-00001-of-00002.gguf", 3);
  write(root / "b/two/Q2_K/Two-Q2_K-00002-of-00002.gguf", 4);
  std::vector<StoredModel> all = store.list();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].repo_id, "a/one");
  EXPECT_EQ(all[0].quant, "Q4_K_M");
  EXPECT_EQ(all[1].quant, "Q8_0");
  EXPECT_EQ(all[1].size, 20u);
  EXPECT_TRUE(all[2].partial);
  EXPECT_EQ(all[2].quant, "F16");
  EXPECT_EQ(all[3].repo_id, "b/two");
  EXPECT_EQ(all[3].n_files, 2);
  EXPECT_EQ(all[3].size, 7u);
  EXPECT_EQ(all[3].path, root / "b/two/Q2_K/Two-Q2_K-00001-of-00002.gguf");

  EXPECT_TRUE(store.remove(name("a/one:Q2_K")).empty());
  EXPECT_EQ(store.remove(name("a/one:q8_0")), std::vector<fs::path>{root / "a/one/One-Q8_0.gguf"});
  EXPECT_TRUE(fs::exists(root / "a/one/One-Q4_K_M.gguf"));
  EXPECT_EQ(store.remove(name("b/two:Q2_K")).size(), 2u);
  EXPECT_FALSE(fs::exists(root / "b"));               // empty folders go too
  EXPECT_EQ(store.remove(name("a/one")).size(), 2u);  // the rest, the partial file included
  EXPECT_FALSE(fs::exists(root / "a"));
  EXPECT_TRUE(fs::exists(root));
  EXPECT_TRUE(store.list().empty());
}

}  // namespace
}  // namespace herd::store
