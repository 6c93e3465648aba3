#include "store/hf_listing.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace herd::store {
namespace {

const char* kSha = "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1";

RepoFile file(const std::string& path, uint64_t size = 100) {
  return RepoFile{path, size, kSha};
}

ModelName name(const std::string& text) {
  std::optional<ModelName> n = parse_model_name(text);
  EXPECT_TRUE(n.has_value()) << text;
  return n.value_or(ModelName{});
}

TEST(ModelName, ParsesOrgRepoAndQuant) {
  ModelName n = name("Qwen/Qwen3-0.6B-GGUF:q8_0");
  EXPECT_EQ(n.org, "Qwen");
  EXPECT_EQ(n.repo, "Qwen3-0.6B-GGUF");
  EXPECT_EQ(n.quant, "q8_0");
  EXPECT_EQ(n.str(), "Qwen/Qwen3-0.6B-GGUF:q8_0");
  EXPECT_EQ(name("hf.co/unsloth/gemma-3-4b-it-GGUF").repo_id(), "unsloth/gemma-3-4b-it-GGUF");
  EXPECT_EQ(name("unsloth/x:UD-Q4_K_XL").quant, "UD-Q4_K_XL");
}

TEST(ModelName, RefusesPathsAndOddNames) {
  for (const char* text : {"model.gguf", "models/tiny.gguf", "/abs/path", "a/b/c", "noslash",
                           "../x", "./x", "a/..", "a/b:", "a/b:q4 k", "a/b c", "", "/", "a/",
                           "org/.hidden", "a/b:Q4:Q5", "my.org/repo", "hf.co/hf.co/r"}) {
    EXPECT_FALSE(parse_model_name(text).has_value()) << text;
  }
}

TEST(Listing, ParsesFilesAndSkipsDirectories) {
  const std::string json = R"([
    {"type":"directory","oid":"x","size":0,"path":"Q8_0"},
    {"type":"file","oid":"y","size":1519,"path":".gitattributes"},
    {"type":"file","oid":"z","size":484220320,"path":"Qwen3-0.6B-Q8_0.gguf",
     "lfs":{"oid":"8A5EDAB282632443219E051E4ADE2D1D5BBC671C781051BF1437897CBDFEA0F1","size":484220320,"pointerSize":135}}
  ])";
  std::vector<RepoFile> files = parse_listing(json);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, ".gitattributes");
  EXPECT_EQ(files[0].sha256, "");
  EXPECT_EQ(files[1].size, 484220320u);
  EXPECT_EQ(files[1].sha256, kSha);  // lower-cased
}

TEST(Listing, RefusesWhatItCannotTrust) {
  const std::string bad_size = R"([{"type":"file","path":"a.gguf","size":1,"lfs":{"oid":")" +
                               std::string(kSha) + R"(","size":2}}])";
  for (const std::string& json : std::vector<std::string>{
           "", "{}", "[1]", R"([{"type":"file"}])", R"([{"type":"file","path":"a.gguf"}])",
           R"([{"type":"file","path":"a.gguf","size":-1}])",
           R"([{"type":"file","path":"../a.gguf","size":1}])",
           R"([{"type":"file","path":"/etc/a.gguf","size":1}])",
           R"([{"type":"file","path":"a//b.gguf","size":1}])",
           R"([{"type":"file","path":"a\\b.gguf","size":1}])",
           R"([{"type":"file","path":"a/./b.gguf","size":1}])",
           R"([{"type":"file","path":"a.gguf","size":1,"lfs":{"oid":"abc"}}])", bad_size}) {
    EXPECT_THROW(parse_listing(json), Error) << json;
  }
}

TEST(Listing, NextPageFromLinkHeader) {
  EXPECT_EQ(next_page_url(R"(<https://hf.co/api/x?cursor=abc>; rel="next")"),
            "https://hf.co/api/x?cursor=abc");
  EXPECT_EQ(next_page_url(R"(<https://a/prev>; rel="prev", <https://a/next>; rel="next")"),
            "https://a/next");
  EXPECT_EQ(next_page_url(R"(<https://a/prev>; rel="prev")"), "");
  EXPECT_EQ(next_page_url(""), "");
}

TEST(QuantOf, FindsTheTag) {
  EXPECT_EQ(quant_of("Qwen3-0.6B-Q4_K_M.gguf"), "Q4_K_M");
  EXPECT_EQ(quant_of("llama-2-7b.q8_0.gguf"), "Q8_0");
  EXPECT_EQ(quant_of("Model-IQ4_XS.gguf"), "IQ4_XS");
  EXPECT_EQ(quant_of("Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf"), "Q4_K_M");
  EXPECT_EQ(quant_of("gemma-3-4b-it-UD-Q4_K_XL.gguf"), "UD-Q4_K_XL");
  EXPECT_EQ(quant_of("model-BF16.gguf"), "BF16");
  EXPECT_EQ(quant_of("Qwen3-8B.gguf"), "");
}

// A repository as Hugging Face shows a typical GGUF one.
std::vector<RepoFile> repo() {
  return {file(".gitattributes"),
          file("README.md"),
          file("Model-Q4_K_M.gguf", 400),
          file("Model-Q4_K_S.gguf"),
          file("Model-Q8_0.gguf", 800),
          file("Model-IQ4_XS.gguf"),
          file("Model-UD-Q4_K_XL.gguf"),
          file("mmproj-Model-F16.gguf"),
          file("BF16/Model-BF16-00001-of-00002.gguf", 1000),
          file("BF16/Model-BF16-00002-of-00002.gguf", 500)};
}

TEST(PickModel, ByQuantTagCaseInsensitive) {
  EXPECT_EQ(pick_model(repo(), name("o/r:q8_0")).first_path(), "Model-Q8_0.gguf");
  EXPECT_EQ(pick_model(repo(), name("o/r:iq4_xs")).first_path(), "Model-IQ4_XS.gguf");
  EXPECT_EQ(pick_model(repo(), name("o/r:Q4_K_S")).first_path(), "Model-Q4_K_S.gguf");
  EXPECT_EQ(pick_model(repo(), name("o/r:ud-q4_k_xl")).first_path(), "Model-UD-Q4_K_XL.gguf");
  // "Q4_K_XL" is the tag of the UD file only: found between separators.
  EXPECT_EQ(pick_model(repo(), name("o/r:Q4_K_XL")).first_path(), "Model-UD-Q4_K_XL.gguf");
}

TEST(PickModel, DefaultIsQ4KMAndNeverTheProjector) {
  EXPECT_EQ(pick_model(repo(), name("o/r")).first_path(), "Model-Q4_K_M.gguf");
  // Without Q4_K_M: the only model, the projector not counted.
  std::vector<RepoFile> two = {file("Model-Q8_0.gguf"), file("mmproj-Model-F16.gguf")};
  EXPECT_EQ(pick_model(two, name("o/r")).first_path(), "Model-Q8_0.gguf");
  // F16 names the model's own F16 file, not the projector's.
  std::vector<RepoFile> f16 = {file("Model-F16.gguf"), file("mmproj-Model-F16.gguf")};
  EXPECT_EQ(pick_model(f16, name("o/r:F16")).first_path(), "Model-F16.gguf");
  EXPECT_EQ(pick_model(f16, name("o/r:mmproj-model-f16")).first_path(), "mmproj-Model-F16.gguf");
}

TEST(PickModel, SplitFilesComeTogetherInOrder) {
  ModelFiles m = pick_model(repo(), name("o/r:bf16"));
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[0].path, "BF16/Model-BF16-00001-of-00002.gguf");
  EXPECT_EQ(m.files[1].path, "BF16/Model-BF16-00002-of-00002.gguf");
  EXPECT_EQ(m.total_size(), 1500u);
  // A split set with a part missing is no model.
  std::vector<RepoFile> broken = {file("M-Q8_0-00001-of-00003.gguf"),
                                  file("M-Q8_0-00003-of-00003.gguf")};
  EXPECT_THROW(pick_model(broken, name("o/r:Q8_0")), Error);
}

TEST(PickModel, ErrorsListTheChoices) {
  try {
    pick_model(repo(), name("o/r:Q2_K"));
    FAIL() << "no Q2_K";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("o/r has no Q2_K model; available:"), std::string::npos) << what;
    EXPECT_NE(what.find("Q8_0 (800 B)"), std::string::npos) << what;
    EXPECT_NE(what.find("BF16 (1.5 KiB in 2 files)"), std::string::npos) << what;
    EXPECT_EQ(what.find("mmproj"), std::string::npos) << what;
  }
  // "Q4_K" is a prefix of Q4_K_M and Q4_K_S, not their tag.
  EXPECT_THROW(pick_model(repo(), name("o/r:Q4_K")), Error);
  std::vector<RepoFile> several = {file("A-Q8_0.gguf"), file("B-Q6_K.gguf")};
  try {
    pick_model(several, name("o/r"));
    FAIL() << "no default";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no Q4_K_M: name one as o/r:QUANT; available: Q8_0"),
              std::string::npos)
        << e.what();
  }
  std::vector<RepoFile> twice = {file("A-Q8_0.gguf"), file("B-Q8_0.gguf")};
  EXPECT_THROW(pick_model(twice, name("o/r:q8_0")), Error);
  EXPECT_THROW(pick_model({file("README.md")}, name("o/r")), Error);
}

}  // namespace
}  // namespace herd::store
