#include "model/model_info.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace herd
