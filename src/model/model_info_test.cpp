#include "model/model_info.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "gguf/writer.h"
#include "model/synth.h"
#include "util/error.h"

namespace herd {
namespace {

TEST(ModelInfo, ReadsEverySharedModel) {
  struct Expect {
    const char* name;
    const char* arch;
    int64_t n_embd, head_dim;
    bool tied, rope_freqs;
  };
  for (const Expect& e : {Expect{"llama-q4_0", "llama", 256, 64, true, false},
                          Expect{"llama3r-f32", "llama", 128, 32, false, true},
                          Expect{"qwen2-f16", "qwen2", 128, 32, true, false},
                          Expect{"qwen3-f32", "qwen3", 128, 64, true, false},
                          Expect{"qwen3moe-f16", "qwen3moe", 128, 64, false, false}}) {
    gguf::File f = gguf::File::open(std::string("../shared/models/") + e.name + ".gguf");
    ModelInfo info = read_model_info(f);
    EXPECT_EQ(info.arch->name, e.arch) << e.name;
    EXPECT_EQ(info.hp.n_embd, e.n_embd) << e.name;
    EXPECT_EQ(info.hp.head_dim, e.head_dim) << e.name;
    EXPECT_EQ(info.hp.n_vocab, 384) << e.name;
    EXPECT_EQ(info.hp.n_layer, 2) << e.name;
    EXPECT_EQ(info.hp.n_head, 4) << e.name;
    EXPECT_EQ(info.hp.n_head_kv, 2) << e.name;
    EXPECT_EQ(info.hp.tied_output, e.tied) << e.name;
    EXPECT_EQ(info.has_rope_freqs, e.rope_freqs) << e.name;
  }
  gguf::File moe = gguf::File::open("../shared/models/qwen3moe-f32.gguf");
  ModelInfo info = read_model_info(moe);
  EXPECT_EQ(info.hp.n_expert, 4);
  EXPECT_EQ(info.hp.n_expert_used, 2);
  EXPECT_EQ(info.hp.n_ff_expert, 96);
}

TEST(ModelInfo, VocabularyFileIsNotAModel) {
  gguf::File f = gguf::File::open("../shared/vocab/ggml-vocab-qwen2.gguf");
  try {
    read_model_info(f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token_embd.weight"), std::string::npos) << e.what();
  }
}

TEST(ModelInfo, UnsupportedArchitectureIsNamed) {
  gguf::File f = gguf::File::open("../shared/vocab/ggml-vocab-falcon.gguf");
  try {
    read_model_info(f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("architecture 'falcon' is not supported"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelInfo, SynthesizedModelsReadBack) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3moe"}) {
    SynthOptions o;
    o.arch = arch;
    o.out_path = ::testing::TempDir() + "/model_info_" + arch + ".gguf";
    o.n_embd = 128;
    o.n_layer = 2;
    o.n_head = 4;
    o.n_expert = 4;
    o.type = "q8_0";
    synthesize(o);
    gguf::File f = gguf::File::open(o.out_path);
    ModelInfo info = read_model_info(f);
    EXPECT_EQ(info.arch->name, arch);
    EXPECT_EQ(info.hp.n_embd, 128);
    EXPECT_EQ(info.hp.n_head_kv, 2);
    EXPECT_GT(info.weight_bytes, 0u);
  }
}

// A copy of `from` whose metadata `edit` may change (through the writer it fills: every
// key but those it returns true for is copied).
std::string edited_copy(const std::string& from, const std::string& name,
                        const std::function<bool(std::string_view, gguf::Writer&)>& edit) {
  const gguf::File f = gguf::File::open(from);
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) {
    if (!edit(key, w)) w.set_value(key, value);
  }
  for (const gguf::TensorInfo& t : f.tensors()) w.add_tensor(t.name, t.type, t.shape);
  const std::string path = ::testing::TempDir() + "/" + name;
  w.write(path, [&](size_t i, std::span<uint8_t> out) {
    std::memcpy(out.data(), f.tensors()[i].data, out.size());
  });
  return path;
}

std::string load_error(const std::string& path) {
  try {
    read_model_info(gguf::File::open(path));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The GLM and MiniMax files of frontier2: partial rope, the NextN block, the q/k norms (per
// head, over the whole row), the kept DSA indexer; and the keys the reference requires.
TEST(ModelInfo, GlmAndMiniMaxFiles) {
  const std::string dir = "../shared/models/frontier2/";
  ModelInfo glm = read_model_info(gguf::File::open(dir + "glm4moe-q8_0.gguf"));
  EXPECT_EQ(glm.hp.n_layer, 3);
  EXPECT_EQ(glm.hp.n_nextn, 1);
  EXPECT_EQ(glm.hp.n_rot, 32);
  EXPECT_EQ(glm.hp.head_dim, 64);
  EXPECT_FALSE(glm.hp.qk_norm_absent);
  EXPECT_EQ(glm.hp.gating, Gating::kSigmoid);
  EXPECT_EQ(glm.hp.expert_weights_scale, 2.5f);
  ModelInfo mm = read_model_info(gguf::File::open(dir + "minimax-m2-f32.gguf"));
  EXPECT_EQ(find_tensor_spec(mm, "blk.0.attn_q_norm.weight")->shape, std::vector<int64_t>{256});
  EXPECT_EQ(mm.hp.gating, Gating::kSigmoid);  // from the file: the reference's default is softmax
  ModelInfo dsa = read_model_info(gguf::File::open(dir + "glm-dsa-f32.gguf"));
  EXPECT_TRUE(dsa.hp.mla_3d_b);
  EXPECT_FALSE(dsa.hp.mla_kv_b);
  EXPECT_EQ(dsa.hp.head_dim, 96);
  EXPECT_EQ(dsa.hp.head_dim_v, 16);
  EXPECT_EQ(dsa.hp.n_indexer_head, 4);
  const TensorSpec* indexer = find_tensor_spec(dsa, "blk.1.indexer.attn_q_b.weight");
  ASSERT_NE(indexer, nullptr);
  EXPECT_EQ(indexer->weight, LayerWeight::kNone);  // listed and kept, not loaded
  EXPECT_EQ(indexer->layer, 1);

  const std::string no_scale = edited_copy(
      dir + "glm4moe-f32.gguf", "glm4moe_no_scale.gguf",
      [](std::string_view key, gguf::Writer&) { return key == "glm4moe.expert_weights_scale"; });
  EXPECT_NE(load_error(no_scale).find("missing 'glm4moe.expert_weights_scale'"), std::string::npos)
      << load_error(no_scale);
  const std::string odd_rope = edited_copy(dir + "minimax-m2-f32.gguf", "minimax_odd_rope.gguf",
                                           [](std::string_view key, gguf::Writer& w) {
                                             if (key != "minimax-m2.rope.dimension_count")
                                               return false;
                                             w.set_u32(key, 33);
                                             return true;
                                           });
  EXPECT_NE(load_error(odd_rope).find("rope.dimension_count 33 must be even"), std::string::npos)
      << load_error(odd_rope);
}

}  // namespace
}  // namespace herd
