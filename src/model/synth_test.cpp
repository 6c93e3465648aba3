#include "model/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include "gguf/reader.h"
#include "model/builtin_vocab.h"
#include "util/error.h"

namespace herd {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

SynthOptions small(const std::string& arch, const std::string& type, const std::string& out) {
  SynthOptions o;
  o.arch = arch;
  o.type = type;
  o.out_path = temp_path(out);
  o.n_embd = 256;
  o.n_layer = 2;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 512;
  o.n_expert = 4;
  o.n_expert_used = 2;
  o.threads = 2;
  return o;
}

TEST(Synth, LlamaHasEveryTensorAndKey) {
  SynthOptions o = small("llama", "f32", "synth_llama.gguf");
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 256u);
  EXPECT_EQ(f.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_u32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), f.get_u32("llama.vocab_size"));
  EXPECT_FALSE(f.get_string("tokenizer.chat_template").empty());
  const int64_t n_vocab = static_cast<int64_t>(tokens.size());
  EXPECT_EQ(f.tensor("token_embd.weight").shape, (std::vector<int64_t>{256, n_vocab}));
  EXPECT_EQ(f.tensor("output.weight").shape, (std::vector<int64_t>{256, n_vocab}));
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight").shape, (std::vector<int64_t>{256, 128}));
  EXPECT_EQ(f.tensor("blk.1.ffn_down.weight").shape, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(f.tensors().size(), 1u + 2 * 9 + 2);

  // Norm weights are drawn around 1, linear weights around 0 with std 1/sqrt(fan_in).
  const auto* norm = reinterpret_cast<const float*>(f.tensor("blk.0.attn_norm.weight").data);
  double mean = 0;
  for (int i = 0; i < 256; ++i) mean += norm[i] / 256.0;
  EXPECT_NEAR(mean, 1.0, 0.05);
  const auto* q = reinterpret_cast<const float*>(f.tensor("blk.0.attn_q.weight").data);
  double var = 0;
  for (int i = 0; i < 256 * 256; ++i) var += q[i] * q[i] / (256.0 * 256.0);
  EXPECT_NEAR(std::sqrt(var), 1.0 / 16.0, 0.003);
}

TEST(Synth, ArchitectureSwitchesShowInTensors) {
  synthesize(small("qwen2", "f16", "synth_qwen2.gguf"));
  gguf::File qwen2 = gguf::File::open(temp_path("synth_qwen2.gguf"));
  EXPECT_NE(qwen2.find_tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(qwen2.tensor("blk.0.attn_q.weight").type, TensorType::F16);
  EXPECT_EQ(qwen2.tensor("blk.0.attn_q.bias").type, TensorType::F32);

  SynthOptions o = small("qwen3", "f16", "synth_qwen3.gguf");
  o.head_dim = 128;  // explicit head size, != embd / heads
  synthesize(o);
  gguf::File qwen3 = gguf::File::open(o.out_path);
  EXPECT_EQ(qwen3.get_u32("qwen3.attention.key_length"), 128u);
  EXPECT_EQ(qwen3.tensor("blk.0.attn_q_norm.weight").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(qwen3.tensor("blk.0.attn_q.weight").shape, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(qwen3.tensor("blk.0.attn_output.weight").shape, (std::vector<int64_t>{512, 256}));

  synthesize(small("qwen3moe", "q8_0", "synth_moe.gguf"));
  gguf::File moe = gguf::File::open(temp_path("synth_moe.gguf"));
  EXPECT_EQ(moe.get_u32("qwen3moe.expert_count"), 4u);
  EXPECT_EQ(moe.tensor("blk.1.ffn_gate_exps.weight").shape, (std::vector<int64_t>{256, 512, 4}));
  EXPECT_EQ(moe.tensor("blk.1.ffn_gate_exps.weight").type, TensorType::Q8_0);
  EXPECT_EQ(moe.tensor("blk.1.ffn_gate_inp.weight").type, TensorType::F32);
  EXPECT_EQ(moe.find_tensor("blk.1.ffn_gate.weight"), nullptr);
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherBytes) {
  SynthOptions a = small("llama", "q4_0", "synth_seed_a.gguf");
  SynthOptions b = a;
  b.out_path = temp_path("synth_seed_b.gguf");
  b.threads = 1;  // thread count must not change the result
  SynthOptions c = a;
  c.out_path = temp_path("synth_seed_c.gguf");
  c.seed = 2;
  synthesize(a);
  synthesize(b);
  synthesize(c);
  EXPECT_EQ(slurp(a.out_path), slurp(b.out_path));
  EXPECT_NE(slurp(a.out_path), slurp(c.out_path));
}

TEST(Synth, Q4KMMixGivesMoreBitsToSomeLayers) {
  SynthOptions o = small("llama", "q4_k_m", "synth_q4km.gguf");
  o.n_layer = 8;
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_u32("general.file_type"), 15u);
  EXPECT_EQ(f.tensor("output.weight").type, TensorType::Q6_K);
  EXPECT_EQ(f.tensor("token_embd.weight").type, TensorType::Q4_K);
  // use_more_bits(i, 8): layers 0, 3, 6, 7.
  for (int il = 0; il < 8; ++il) {
    bool more = il == 0 || il == 3 || il == 6 || il == 7;
    TensorType want = more ? TensorType::Q6_K : TensorType::Q4_K;
    std::string blk = "blk." + std::to_string(il) + ".";
    EXPECT_EQ(f.tensor(blk + "attn_v.weight").type, want) << il;
    EXPECT_EQ(f.tensor(blk + "ffn_down.weight").type, want) << il;
    EXPECT_EQ(f.tensor(blk + "attn_q.weight").type, TensorType::Q4_K) << il;
  }
}

TEST(Synth, VocabFileProvidesTokenizer) {
  SynthOptions o = small("llama", "q8_0", "synth_spm.gguf");
  o.vocab_path = "../shared/vocab/ggml-vocab-llama-spm.gguf";
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 32000u);
  EXPECT_EQ(f.tensor("token_embd.weight").shape[1], 32000);
}

TEST(Synth, BadOptionsAreNamed) {
  SynthOptions o = small("gpt9", "f16", "synth_bad.gguf");
  EXPECT_THROW(synthesize(o), Error);
  o = small("llama", "q3_xs", "synth_bad.gguf");
  EXPECT_THROW(synthesize(o), Error);
  o = small("llama", "f16", "synth_bad.gguf");
  o.n_head = 3;  // 256 is not a multiple of 3
  try {
    synthesize(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--heads 3"), std::string::npos) << e.what();
  }
  o = small("llama", "f16", "synth_bad.gguf");
  o.vocab_path = "../shared/models/README.md";
  EXPECT_THROW(synthesize(o), Error);
}

TEST(BuiltinVocab, IsConsistent) {
  BuiltinVocab v = make_builtin_vocab();
  EXPECT_EQ(v.tokens.size(), v.token_types.size());
  EXPECT_GT(v.merges.size(), 100u);
  EXPECT_EQ(v.tokens[v.eos_id], "<|im_end|>");
  EXPECT_EQ(byte_to_symbol(' '), "\xC4\xA0");  // U+0120, the GPT-2 symbol for a space
  EXPECT_EQ(byte_to_symbol('A'), "A");
  EXPECT_EQ(byte_to_symbol(0), "\xC4\x80");  // U+0100
  // Every merge joins two existing tokens into an existing token.
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  for (const std::string& m : v.merges) {
    size_t space = m.find(' ');
    ASSERT_NE(space, std::string::npos);
    EXPECT_TRUE(known.count(m.substr(0, space))) << m;
    EXPECT_TRUE(known.count(m.substr(space + 1))) << m;
    EXPECT_TRUE(known.count(m.substr(0, space) + m.substr(space + 1))) << m;
  }
  // Deterministic.
  EXPECT_EQ(make_builtin_vocab().merges, v.merges);
}

}  // namespace
}  // namespace herd
