#include "model/synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include "gguf/reader.h"
#include "model/builtin_vocab.h"
#include "model/file_type.h"
#include "model/model_info.h"
#include "model/synth_test_util.h"
#include "quant/types.h"
#include "util/error.h"

namespace herd {
namespace {

using namespace synth_testing;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

std::vector<float> dequantized(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo& t = f.tensor(name);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  const size_t row = row_bytes(t.type, t.shape[0]);
  for (int64_t r = 0; r < n / t.shape[0]; ++r) {
    type_traits(t.type).dequantize(t.data + static_cast<size_t>(r) * row,
                                   out.data() + r * t.shape[0], t.shape[0]);
  }
  return out;
}

// attn_k_b and attn_v_b are attn_kv_b cut per head (frontier README): kv = attn_kv_b as
// (n_head, nope + v, kv_lora); k_b = kv[:, :nope, :].transpose(0, 2, 1), v_b = kv[:, nope:, :].
// Returns the largest difference.
float mla_cut_error(const gguf::File& f, const HParams& hp, int il) {
  const std::string blk = "blk." + std::to_string(il) + ".";
  std::vector<float> kv = dequantized(f, blk + "attn_kv_b.weight");
  std::vector<float> kb = dequantized(f, blk + "attn_k_b.weight");
  std::vector<float> vb = dequantized(f, blk + "attn_v_b.weight");
  const int64_t nope = hp.head_dim - hp.n_rot, v = hp.head_dim_v, r = hp.kv_lora_rank;
  float err = 0;
  for (int64_t h = 0; h < hp.n_head; ++h) {
    for (int64_t j = 0; j < nope + v; ++j) {
      for (int64_t c = 0; c < r; ++c) {
        const float want = kv[static_cast<size_t>((h * (nope + v) + j) * r + c)];
        const float got = j < nope ? kb[static_cast<size_t>((h * r + c) * nope + j)]
                                   : vb[static_cast<size_t>((h * v + j - nope) * r + c)];
        err = std::max(err, std::abs(got - want));
      }
    }
  }
  return err;
}

TEST(Synth, NewArchitecturesReadBackInEveryType) {
  for (const std::string arch : {"deepseek2", "gpt-oss", "gemma3", "glm4moe", "minimax-m2",
                                 "glm-dsa", "deepseek4", "gemma4"}) {
    for (const std::string type : {"f32", "q8_0", "q4_k_m"}) {
      SCOPED_TRACE(arch + " " + type);
      SynthOptions o = small_new(arch, type, "synth_" + arch + "_" + type + ".gguf");
      synthesize(o);
      expect_reads_back(o);
    }
  }
}

TEST(Synth, NextNBlocksAreListedAndCheckedNotRun) {
  SynthOptions o = small_new("deepseek2", "q8_0", "synth_nextn.gguf");
  o.n_layer = 2;
  o.n_nextn = 1;
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_u32("deepseek2.block_count"), 3u);
  EXPECT_EQ(f.get_u32("deepseek2.nextn_predict_layers"), 1u);
  const ModelInfo info = read_model_info(f);
  EXPECT_EQ(info.hp.n_layer, 2);  // the blocks the forward pass runs
  EXPECT_EQ(info.hp.n_nextn, 1);
  EXPECT_TRUE(layer_options(*info.arch, info.hp, 2).nextn);
  EXPECT_FALSE(layer_options(*info.arch, info.hp, 1).nextn);
  // The NextN block is listed (its own parts and a whole block), in no stage's layers and
  // never cut.
  int nextn_tensors = 0;
  for (const TensorSpec& t : info.tensors) {
    if (!t.name.starts_with("blk.2.")) continue;
    ++nextn_tensors;
    EXPECT_EQ(t.layer, -1) << t.name;
    EXPECT_EQ(t.split, SplitBy::kNone) << t.name;
    EXPECT_FALSE(t.per_expert) << t.name;
  }
  EXPECT_NE(find_tensor_spec(info, "blk.2.nextn.eh_proj.weight"), nullptr);
  EXPECT_NE(find_tensor_spec(info, "blk.2.ffn_gate_exps.weight"), nullptr);
  EXPECT_GT(nextn_tensors, 10);
  // The MTP head's view: the block counted in n_layer and bound as a layer of its own.
  const ModelInfo mtp = mtp_model_info(info);
  EXPECT_EQ(mtp.hp.n_layer, 3);
  EXPECT_EQ(mtp.hp.n_nextn, 0);
  EXPECT_TRUE(layer_options(*mtp.arch, mtp.hp, 2).nextn_run);
  EXPECT_FALSE(layer_options(*mtp.arch, mtp.hp, 1).nextn_run);
  const TensorSpec* experts = find_tensor_spec(mtp, "blk.2.ffn_gate_exps.weight");
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->layer, 2);
  EXPECT_NE(experts->weight, LayerWeight::kNone);
  EXPECT_NE(find_tensor_spec(mtp, "blk.2.nextn.eh_proj.weight"), nullptr);
  EXPECT_EQ(mtp.tensors.size(), info.tensors.size());
  EXPECT_THROW(mtp_model_info(mtp), Error);  // no NextN block left to view
  // A default deepseek2 has none; a NextN count that leaves nothing to run is refused.
  EXPECT_EQ(synth_hparams(small_new("deepseek2", "f32", "x"), 256).n_nextn, 0);
  SynthOptions bad = small_new("deepseek2", "f32", "synth_nextn_bad.gguf");
  bad.n_nextn = 17;
  EXPECT_THROW(synthesize(bad), Error);
}

// Qwen3.5 / Qwen3-Next: Gated DeltaNet layers with gated full attention every
// full_attention_interval-th layer (qwen3next: always 4), the ssm.* keys, and each variant's
// own tensors (ssm_ba or ssm_beta / ssm_alpha, attn_q of [q | gate] per head, the shared
// expert's gate).
TEST(Synth, DeepSeek2HasV3Layout) {
  SynthOptions o = small_new("deepseek2", "f32", "synth_ds2_layout.gguf");
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  // The reference converter's layout: per-head sizes, head_count_kv = head_count.
  EXPECT_EQ(f.get_u32("deepseek2.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.get_u32("deepseek2.attention.key_length"), 96u);
  EXPECT_EQ(f.get_u32("deepseek2.attention.value_length"), 64u);
  EXPECT_EQ(f.get_u32("deepseek2.rope.dimension_count"), 32u);
  EXPECT_EQ(f.get_u32("deepseek2.attention.q_lora_rank"), 64u);
  EXPECT_EQ(f.get_u32("deepseek2.attention.kv_lora_rank"), 64u);
  EXPECT_EQ(f.get_u32("deepseek2.leading_dense_block_count"), 1u);
  EXPECT_EQ(f.get_u32("deepseek2.expert_shared_count"), 1u);
  EXPECT_EQ(f.get_u32("deepseek2.expert_gating_func"), 2u);
  EXPECT_EQ(f.get_f32("deepseek2.expert_weights_scale"), 2.5f);
  EXPECT_TRUE(f.get_bool("deepseek2.expert_weights_norm"));
  EXPECT_EQ(f.get_string("deepseek2.rope.scaling.type"), "yarn");
  EXPECT_EQ(f.get_f32("deepseek2.rope.scaling.factor"), 40.0f);
  EXPECT_EQ(f.get_u32("deepseek2.rope.scaling.original_context_length"), 4096u);
  EXPECT_FLOAT_EQ(f.get_f32("deepseek2.rope.scaling.yarn_log_multiplier"), 0.1f);
  EXPECT_EQ(f.tensor("blk.0.ffn_gate.weight").shape, (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(f.tensor("blk.1.exp_probs_b.bias").shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(f.tensor("blk.2.ffn_up_shexp.weight").shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(f.tensor("blk.0.attn_kv_b.weight").shape, (std::vector<int64_t>{64, 4 * 128}));
  EXPECT_EQ(f.tensor("blk.0.attn_k_b.weight").shape, (std::vector<int64_t>{64, 4 * 64}));
  EXPECT_EQ(f.tensor("blk.0.attn_v_b.weight").shape, (std::vector<int64_t>{64, 4 * 64}));
  EXPECT_NE(f.find_tensor("output.weight"), nullptr);
  const HParams hp = read_model_info(f).hp;
  // Cut from the same draws: exactly equal in f32.
  for (int il = 0; il < 3; ++il) EXPECT_EQ(mla_cut_error(f, hp, il), 0.0f) << il;
  // And not all zero: attn_kv_b holds N(0, 1/kv_lora) values.
  std::vector<float> kv = dequantized(f, "blk.1.attn_kv_b.weight");
  double var = 0;
  for (float x : kv) var += x * x / static_cast<double>(kv.size());
  EXPECT_NEAR(std::sqrt(var), 1.0 / 8.0, 0.01);
}

// DeepSeek V4: its keys as frontier2's README lists them, the hyper-connection matrices kept
// f32 in a q8_0 file, and a hash table of distinct expert ids per token.
TEST(Synth, DeepSeek2CutSurvivesRounding) {
  // f16 and bf16 round each value alone: still exact. q8_0 quantizes each of the three on
  // its own (as llama-quantize): equal within a q8_0 step of these N(0, 1/64) values.
  for (const std::string type : {"f16", "bf16", "q8_0", "q4_k_m"}) {
    SCOPED_TRACE(type);
    SynthOptions o = small_new("deepseek2", type, "synth_ds2_cut_" + type + ".gguf");
    synthesize(o);
    gguf::File f = gguf::File::open(o.out_path);
    const HParams hp = read_model_info(f).hp;
    const float err = mla_cut_error(f, hp, 2);
    if (type == "f16" || type == "bf16") {
      EXPECT_EQ(err, 0.0f);
    } else {
      EXPECT_LT(err, type == "q8_0" ? 0.01f : 0.1f);
      EXPECT_GT(err, 0.0f);
    }
  }
}

TEST(Synth, DeepSeek2LiteAndV2Variants) {
  // V2-Lite: no query compression, plain attn_q, no q_lora_rank key.
  SynthOptions lite = small_new("deepseek2", "q8_0", "synth_ds2_lite.gguf");
  lite.q_lora_rank = 0;
  synthesize(lite);
  expect_reads_back(lite);
  gguf::File f = gguf::File::open(lite.out_path);
  EXPECT_FALSE(f.has("deepseek2.attention.q_lora_rank"));
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").shape, (std::vector<int64_t>{128, 4 * 96}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_q_a.weight"), nullptr);

  // V2: softmax router without selection bias, weights not renormalised, groups.
  SynthOptions v2 = small_new("deepseek2", "f32", "synth_ds2_v2.gguf");
  v2.gating = "softmax";
  v2.n_expert_group = 4;
  v2.n_expert_group_used = 2;
  v2.n_leading_dense = 2;
  v2.n_expert_shared = 2;
  synthesize(v2);
  expect_reads_back(v2);
  gguf::File g = gguf::File::open(v2.out_path);
  const HParams hp = read_model_info(g).hp;
  EXPECT_EQ(hp.gating, Gating::kSoftmax);
  EXPECT_FALSE(hp.expert_selection_bias);
  EXPECT_FALSE(hp.expert_weights_norm);
  EXPECT_EQ(hp.expert_weights_scale, 1.0f);
  EXPECT_EQ(hp.n_expert_group, 4);
  EXPECT_EQ(g.find_tensor("blk.2.exp_probs_b.bias"), nullptr);
  EXPECT_EQ(g.tensor("blk.1.ffn_down.weight").shape, (std::vector<int64_t>{256, 128}));
  EXPECT_EQ(g.tensor("blk.2.ffn_gate_shexp.weight").shape, (std::vector<int64_t>{128, 128}));
}

TEST(Synth, DeepSeek2DefaultsFollowV3AtScale) {
  SynthOptions o;
  o.arch = "deepseek2";
  o.n_embd = 2048;
  o.n_head = 16;
  o.n_layer = 4;
  HParams hp = synth_hparams(o, 1000);
  EXPECT_EQ(hp.head_dim, 192);
  EXPECT_EQ(hp.n_rot, 64);
  EXPECT_EQ(hp.head_dim_v, 128);
  EXPECT_EQ(hp.kv_lora_rank, 512);
  EXPECT_EQ(hp.q_lora_rank, 768);
  EXPECT_EQ(hp.n_leading_dense, 1);
  EXPECT_EQ(hp.n_expert_shared, 1);
  EXPECT_EQ(hp.gating, Gating::kSigmoid);
  EXPECT_TRUE(hp.expert_selection_bias);
  EXPECT_EQ(hp.rope_scaling, RopeScaling::kYarn);
  // Small: the frontier test model's proportions (key 48 = 32 nope + 16 rope, latent embd / 2).
  o.n_embd = 128;
  o.n_head = 4;
  o.head_dim = 48;
  hp = synth_hparams(o, 1000);
  EXPECT_EQ(hp.n_rot, 16);
  EXPECT_EQ(hp.head_dim_v, 32);
  EXPECT_EQ(hp.kv_lora_rank, 64);
  EXPECT_EQ(hp.q_lora_rank, 64);
  // 64-wide keys: 32 nope (attn_k_b's rows fit q8_0 blocks) + 32 rope.
  o.head_dim = 64;
  EXPECT_EQ(synth_hparams(o, 1000).n_rot, 32);
  o.head_dim = 96;
  EXPECT_EQ(synth_hparams(o, 1000).n_rot, 32);
}

TEST(Synth, GptOssAndGemma3Layouts) {
  SynthOptions o = small_new("gpt-oss", "q4_k_m", "synth_oss_layout.gguf");
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_u32("gpt-oss.attention.sliding_window"), 128u);
  EXPECT_EQ(f.get_u32("gpt-oss.expert_used_count"), 4u);
  EXPECT_EQ(f.get_u32("gpt-oss.feed_forward_length"), 64u);
  EXPECT_EQ(f.get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(f.get_f32("gpt-oss.rope.scaling.factor"), 32.0f);
  EXPECT_FALSE(f.has("gpt-oss.rope.scaling.yarn_log_multiplier"));
  // Biases stay f32, 2-D per-expert ones too; sinks are drawn N(0, 1).
  EXPECT_EQ(f.tensor("blk.0.ffn_gate_exps.bias").type, TensorType::F32);
  EXPECT_EQ(f.tensor("blk.0.ffn_down_exps.bias").shape, (std::vector<int64_t>{128, 8}));
  EXPECT_EQ(f.tensor("blk.0.ffn_down_exps.bias").type, TensorType::F32);
  EXPECT_EQ(f.tensor("blk.0.ffn_gate_inp.weight").type, TensorType::F32);
  EXPECT_EQ(f.tensor("blk.0.attn_sinks.weight").type, TensorType::F32);
  EXPECT_EQ(f.tensor("blk.1.attn_q.weight").shape, (std::vector<int64_t>{128, 4 * 64}));

  SynthOptions g = small_new("gemma3", "q8_0", "synth_gemma3_layout.gguf");
  synthesize(g);
  gguf::File h = gguf::File::open(g.out_path);
  EXPECT_EQ(h.get_u32("gemma3.attention.sliding_window"), 32u);  // 256 / 8
  EXPECT_EQ(h.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(h.get_f32("gemma3.rope.scaling.factor"), 8.0f);
  EXPECT_EQ(h.find_tensor("output.weight"), nullptr);  // tied, as Gemma's converter
  EXPECT_NE(h.find_tensor("blk.5.post_ffw_norm.weight"), nullptr);
  g.n_ctx = 1 << 16;
  EXPECT_EQ(synth_hparams(g, 1000).sliding_window, 512);
}

// Synthesized with the shapes of ../shared/models/frontier's files, a model has their keys
// (same types and values) and their tensors (names and shapes): the layout of the
// reference's converters.
TEST(Synth, FrontierShapesGiveFrontierLayout) {
  const std::string dir = "../shared/models/frontier/";
  std::vector<SynthOptions> cases(3);
  for (SynthOptions& o : cases) {
    o.type = "f32";
    o.n_ctx = 256;
    o.threads = 2;
    o.n_head = 4;
    o.n_embd = 128;
    o.n_expert = 8;
  }
  SynthOptions& ds = cases[0];
  ds.arch = "deepseek2";
  ds.n_layer = 3;
  ds.n_ff = 128;
  ds.head_dim = 48;
  ds.rope_dim = 16;
  ds.n_ff_expert = 32;
  ds.rope_factor = 4;
  ds.rope_original_ctx = 64;
  SynthOptions& gemma = cases[1];
  gemma.arch = "gemma3";
  gemma.n_layer = 6;
  gemma.n_embd = 64;
  gemma.n_ff = 128;
  gemma.n_head_kv = 1;
  gemma.head_dim = 64;
  gemma.sliding_window = 8;
  SynthOptions& oss = cases[2];
  oss.arch = "gpt-oss";
  oss.n_layer = 2;
  oss.n_head_kv = 2;
  oss.head_dim = 64;
  oss.n_ff_expert = 32;
  oss.sliding_window = 8;
  for (SynthOptions& o : cases) {
    SCOPED_TRACE(o.arch);
    const std::string ref_path = dir + o.arch + "-f32.gguf";
    o.vocab_path = ref_path;
    o.out_path = temp_path("synth_frontier_" + o.arch + ".gguf");
    synthesize(o);
    gguf::File ref = gguf::File::open(ref_path);
    gguf::File f = gguf::File::open(o.out_path);
    for (const auto& [key, want] : ref.metadata()) {
      if (!key.starts_with(o.arch + ".")) continue;
      const gguf::Value* got = f.find(key);
      ASSERT_NE(got, nullptr) << key;
      EXPECT_EQ(got->type, want.type) << key;
      EXPECT_EQ(got->u, want.u) << key;
      EXPECT_EQ(got->i, want.i) << key;
      EXPECT_EQ(static_cast<float>(got->f), static_cast<float>(want.f)) << key;
      EXPECT_EQ(got->str, want.str) << key;
    }
    // The same names and shapes; the order within a block differs (model_tensors: gate,
    // down, up; the frontier files: gate, up, down), which readers do not mind (by name).
    ASSERT_EQ(f.tensors().size(), ref.tensors().size());
    for (const gguf::TensorInfo& t : ref.tensors()) {
      const gguf::TensorInfo* got = f.find_tensor(t.name);
      ASSERT_NE(got, nullptr) << t.name;
      EXPECT_EQ(got->shape, t.shape) << t.name;
    }
  }
}

// Synthesized with the shapes of ../shared/models/frontier2's Gemma 4 files (26B-A4B style
// with experts and V = K on the global layer; E2B style with per-layer inputs, shared KV and
// a doubled MLP on the shared layers, tied output), a model has their keys and tensors.
TEST(Synth, Gemma4ShapesGiveFrontier2Layout) {
  for (const bool e : {false, true}) {
    SynthOptions o;
    o.arch = "gemma4";
    o.type = "f32";
    o.n_ctx = 256;
    o.threads = 2;
    o.n_embd = 64;
    o.n_head = 4;
    o.n_head_kv = e ? 1 : 2;
    o.head_dim = 32;  // the sliding layers'; the global ones' twice that
    o.n_ff = 96;
    o.sliding_window = 8;
    o.n_layer = e ? 6 : 4;
    o.n_expert = e ? 0 : 8;
    o.n_ff_expert = 32;
    o.n_expert_used = 2;
    o.tied_output = e ? 1 : 0;
    if (e) {
      o.n_embd_per_layer = 32;
      o.sliding_period = 3;
    }
    const std::string name = e ? "gemma4e" : "gemma4";
    SCOPED_TRACE(name);
    const std::string ref_path = "../shared/models/frontier2/" + name + "-f32.gguf";
    o.vocab_path = ref_path;
    o.out_path = temp_path("synth_frontier2_" + name + ".gguf");
    synthesize(o);
    gguf::File ref = gguf::File::open(ref_path);
    gguf::File f = gguf::File::open(o.out_path);
    for (const auto& [key, want] : ref.metadata()) {
      if (!key.starts_with("gemma4.")) continue;
      const gguf::Value* got = f.find(key);
      ASSERT_NE(got, nullptr) << key;
      EXPECT_EQ(got->type, want.type) << key;
      EXPECT_EQ(got->u, want.u) << key;
      EXPECT_EQ(got->i, want.i) << key;
      EXPECT_EQ(static_cast<float>(got->f), static_cast<float>(want.f)) << key;
      if (want.type == gguf::ValueType::ARRAY) {
        EXPECT_EQ(got->elem_type, want.elem_type) << key;
        EXPECT_EQ(f.get_i32_array(key), ref.get_i32_array(key)) << key;
      }
    }
    ASSERT_EQ(f.tensors().size(), ref.tensors().size());
    for (const gguf::TensorInfo& t : ref.tensors()) {
      const gguf::TensorInfo* got = f.find_tensor(t.name);
      ASSERT_NE(got, nullptr) << t.name;
      EXPECT_EQ(got->shape, t.shape) << t.name;
    }
    // Proportional rope: the first quarter of the global layers' pairs turn.
    const auto* freqs = reinterpret_cast<const float*>(f.tensor("rope_freqs.weight").data);
    const auto* want = reinterpret_cast<const float*>(ref.tensor("rope_freqs.weight").data);
    EXPECT_TRUE(std::equal(freqs, freqs + 32, want));
    expect_reads_back(o);
  }
}

TEST(Synth, Gemma4DefaultsAndOptions) {
  SynthOptions o = small_new("gemma4", "q8_0", "synth_gemma4.gguf");
  o.n_layer = 12;
  o.n_expert = -1;
  HParams hp = synth_hparams(o, 1000);
  EXPECT_EQ(hp.n_expert, 128);
  o.n_expert = 16;
  hp = synth_hparams(o, 1000);
  // 26B-A4B: 5 sliding then a global layer, the global heads twice as wide with a quarter of
  // the KV heads (at least one), V = K there, 8 experts used, soft-capping 30, tied.
  EXPECT_EQ(hp.swa_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(hp.head_dim_swa, 64);
  EXPECT_EQ(hp.head_dim, 128);
  EXPECT_EQ(hp.n_head_kv_of[0], 2);
  EXPECT_EQ(hp.n_head_kv_of[5], 1);
  EXPECT_TRUE(hp.global_v_is_k);
  EXPECT_EQ(hp.n_expert_used, 8);
  EXPECT_EQ(hp.final_softcap, 30.0f);
  EXPECT_TRUE(hp.tied_output);
  EXPECT_EQ(hp.n_kv_shared, 0);
  // E2B style: per-layer inputs bring shared KV (the second half, after [sliding, global])
  // with a doubled MLP, and attn_v everywhere.
  o.n_expert = 0;
  o.n_embd_per_layer = 32;
  hp = synth_hparams(o, 1000);
  EXPECT_EQ(hp.n_expert, 0);
  EXPECT_EQ(hp.n_kv_shared, 6);
  EXPECT_EQ(hp.n_ff_of[5], 256);
  EXPECT_EQ(hp.n_ff_of[6], 512);
  EXPECT_FALSE(hp.global_v_is_k);
  synthesize(o);
  expect_reads_back(o);
  o.n_kv_shared = 5;  // layer 6 (sliding) would be the last with its own cache
  EXPECT_THROW(synth_hparams(o, 1000), Error);
  o.n_kv_shared = -1;
  o.sliding_window = 0;
  EXPECT_THROW(synth_hparams(o, 1000), Error);
  SynthOptions llama = small("llama", "f32", "unused.gguf");
  llama.n_embd_per_layer = 16;
  EXPECT_THROW(synth_hparams(llama, 1000), Error);
}

// llama-quantize --pure Q8_0 left deepseek2-q8_0's router and 1-D tensors f32 and made every
// other weight q8_0, attn_k_b's rows of 32 included: the q8_0 mix does the same.
TEST(Synth, Q8MixMatchesFrontierDeepSeek2) {
  gguf::File f = gguf::File::open("../shared/models/frontier/deepseek2-q8_0.gguf");
  ModelInfo info = read_model_info(f);
  const FileType q8 = *find_file_type("q8_0");
  for (const TensorSpec& t : info.tensors) {
    EXPECT_EQ(tensor_type_for(q8, t, info.hp), f.tensor(t.name).type) << t.name;
  }
}

// GLM-4.5 (and Air without q/k norm), MiniMax-M2 and GLM-5 as their converters write them
// (../shared/models/frontier2/README.md).
// --block-scale scales the blocks' output projections only: the same draws, times the scale.
TEST(Synth, BlockScaleScalesOnlyTheBlocksOutputs) {
  SynthOptions plain = small("llama", "f32", "synth_block_plain.gguf");
  SynthOptions scaled = plain;
  scaled.out_path = temp_path("synth_block_scaled.gguf");
  scaled.block_scale = 0.01f;
  synthesize(plain);
  synthesize(scaled);
  const gguf::File a = gguf::File::open(plain.out_path), b = gguf::File::open(scaled.out_path);
  for (const char* name : {"blk.0.attn_output.weight", "blk.1.ffn_down.weight"}) {
    const std::vector<float> x = dequantized(a, name), y = dequantized(b, name);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); i += 97) EXPECT_NEAR(y[i], 0.01f * x[i], 1e-6f) << name;
  }
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_up.weight"}) {
    EXPECT_EQ(dequantized(a, name), dequantized(b, name)) << name;
  }
  scaled.block_scale = -1;
  try {
    synth_hparams(scaled, 1000);
    ADD_FAILURE() << "a negative --block-scale was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--block-scale"), std::string::npos) << e.what();
  }
}

TEST(Synth, NewOptionsAreChecked) {
  auto fails = [](SynthOptions o, const std::string& needle) {
    try {
      synth_hparams(o, 1000);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  SynthOptions o = small_new("deepseek2", "f32", "unused.gguf");
  o.rope_dim = 96;
  fails(o, "--rope-dim");
  o = small_new("deepseek2", "f32", "unused.gguf");
  o.gating = "relu";
  fails(o, "--gating 'relu'");
  o = small_new("deepseek2", "f32", "unused.gguf");
  o.n_expert_group = 3;
  fails(o, "--expert-groups 3");
  o = small_new("deepseek2", "f32", "unused.gguf");
  o.rope_scaling = "ntk";
  fails(o, "--rope-scaling 'ntk'");
  o = small("llama", "f32", "unused.gguf");
  o.sliding_window = 64;
  fails(o, "--window");
  o = small("llama", "f32", "unused.gguf");
  o.kv_lora_rank = 64;
  fails(o, "--kv-lora");
  o = small("llama", "f32", "unused.gguf");
  o.n_leading_dense = 1;
  fails(o, "--dense-layers");
  o = small("llama", "f32", "unused.gguf");
  o.qk_norm = 0;
  fails(o, "--qk-norm");
  o = small_new("glm4moe", "f32", "unused.gguf");
  o.rope_dim = 66;
  fails(o, "--rope-dim 66");
  o = small_new("glm-dsa", "f32", "unused.gguf");
  o.q_lora_rank = 0;
  fails(o, "--q-lora 0");
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
