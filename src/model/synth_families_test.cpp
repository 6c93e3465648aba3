// The synthesizer on the families issue 29 added beside Gemma 4: the Gated DeltaNet hybrids
// (Qwen3.5 / 3.6, Qwen3-Next), DeepSeek V4, GLM-4.5 to 5 and MiniMax M2 write their
// converters' keys and tensors and read back as meant.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/model_info.h"
#include "model/synth.h"
#include "model/synth_test_util.h"
#include "quant/types.h"
#include "util/error.h"

namespace herd {
namespace {

using namespace synth_testing;

TEST(Synth, GatedDeltaNetHybridsReadBack) {
  for (const std::string arch : {"qwen35moe", "qwen35", "qwen3next"}) {
    for (const std::string type : {"f32", "q8_0"}) {
      SCOPED_TRACE(arch + " " + type);
      SynthOptions o = small(arch, type, "synth_" + arch + "_" + type + ".gguf");
      o.n_layer = 6;
      o.n_embd = 128;
      o.delta_n_k_heads = 2;
      o.delta_n_v_heads = 4;
      o.delta_head_dim = 64;
      if (arch == "qwen35") o.full_attention_interval = 3;
      synthesize(o);
      expect_reads_back(o);
      gguf::File f = gguf::File::open(o.out_path);
      const ModelInfo info = read_model_info(f);
      const HParams& hp = info.hp;
      EXPECT_EQ(hp.delta_n_k_heads, 2);
      EXPECT_EQ(hp.delta_n_v_heads, 4);
      EXPECT_EQ(hp.delta_head_k, 64);
      EXPECT_EQ(hp.delta_head_v, 64);
      EXPECT_EQ(hp.delta_conv_kernel, 4);
      EXPECT_EQ(hp.n_rot, hp.head_dim / 4);
      const int every = arch == "qwen35" ? 3 : 4;
      for (int64_t il = 0; il < hp.n_layer; ++il) {
        const bool linear = layer_options(*info.arch, hp, il).linear;
        EXPECT_EQ(linear, (il + 1) % every != 0) << "layer " << il;
        const std::string blk = "blk." + std::to_string(il) + ".";
        EXPECT_EQ(f.find_tensor(blk + "ssm_out.weight") != nullptr, linear);
        EXPECT_EQ(f.find_tensor(blk + "ssm_ba.weight") != nullptr, linear && arch == "qwen3next");
        EXPECT_EQ(f.find_tensor(blk + "ssm_beta.weight") != nullptr, linear && arch != "qwen3next");
        if (!linear) {
          EXPECT_EQ(f.tensor(blk + "attn_q.weight").shape[1], 2 * hp.n_head * hp.head_dim);
        }
        EXPECT_EQ(f.find_tensor(blk + "ffn_gate_inp_shexp.weight") != nullptr, arch != "qwen35");
      }
      EXPECT_EQ(f.tensor("blk.0.ssm_conv1d.weight").type, TensorType::F32);
      EXPECT_EQ(f.has(arch + ".rope.dimension_sections"), arch != "qwen3next");
    }
  }
  SynthOptions fixed = small("qwen3next", "f32", "synth_qwen3next_interval.gguf");
  fixed.full_attention_interval = 2;
  EXPECT_THROW(synth_hparams(fixed, 384), Error);
  SynthOptions llama = small("llama", "f32", "synth_llama_linear.gguf");
  llama.delta_n_v_heads = 4;
  EXPECT_THROW(synth_hparams(llama, 384), Error);
}

TEST(Synth, DeepSeek4HasV4Layout) {
  SynthOptions o = small_new("deepseek4", "q8_0", "synth_ds4_layout.gguf");
  o.n_layer = 4;
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_u32("deepseek4.attention.head_count_kv"), 1u);
  EXPECT_EQ(f.get_i32_array("deepseek4.attention.compress_ratios"),
            (std::vector<int32_t>{0, 4, 128, 4}));
  EXPECT_EQ(f.get_u32("deepseek4.expert_gating_func"), 4u);
  EXPECT_EQ(f.get_u32("deepseek4.hyper_connection.count"), 4u);
  EXPECT_EQ(f.get_u32("deepseek4.hash_layer_count"), 2u);
  EXPECT_EQ(f.get_f32("deepseek4.swiglu_clamp_exp"), 10.0f);
  EXPECT_FALSE(f.has("deepseek4.attention.kv_lora_rank"));  // read from attn_kv_a_norm
  const ModelInfo info = read_model_info(f);
  EXPECT_EQ(info.hp.kv_lora_rank, 64);
  EXPECT_EQ(f.tensor("blk.0.hc_attn_fn.weight").type, TensorType::F32);
  EXPECT_EQ(f.tensor("output_hc_fn.weight").type, TensorType::F32);
  EXPECT_EQ(f.tensor("blk.1.attn_compressor_kv.weight").type, TensorType::Q8_0);
  EXPECT_EQ(f.tensor("blk.1.attn_compressor_kv.weight").shape, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(f.tensor("blk.2.attn_compressor_kv.weight").shape, (std::vector<int64_t>{128, 64}));
  EXPECT_NE(f.find_tensor("blk.3.indexer.proj.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.2.indexer.proj.weight"), nullptr);  // HCA: no indexer
  EXPECT_EQ(f.find_tensor("blk.1.exp_probs_b.bias"), nullptr);     // hash-routed
  EXPECT_NE(f.find_tensor("blk.2.exp_probs_b.bias"), nullptr);
  const gguf::TensorInfo& map = f.tensor("blk.0.ffn_gate_tid2eid.weight");
  ASSERT_EQ(map.type, TensorType::I32);
  std::vector<int32_t> ids(static_cast<size_t>(map.n_elements));
  std::memcpy(ids.data(), map.data, ids.size() * sizeof(int32_t));
  std::set<int32_t> used;
  for (size_t t = 0; t < ids.size(); t += 2) {
    EXPECT_NE(ids[t], ids[t + 1]);
    for (size_t j = t; j < t + 2; ++j) {
      EXPECT_GE(ids[j], 0);
      EXPECT_LT(ids[j], 8);
      used.insert(ids[j]);
    }
  }
  EXPECT_EQ(used.size(), 8u);
}

TEST(Synth, GlmAndMiniMaxLayouts) {
  SynthOptions o = small_new("glm4moe", "q8_0", "synth_glm4moe_layout.gguf");
  synthesize(o);
  gguf::File f = gguf::File::open(o.out_path);
  EXPECT_EQ(f.get_u32("glm4moe.block_count"), 4u);  // 3 + 1 NextN
  EXPECT_EQ(f.get_u32("glm4moe.nextn_predict_layers"), 1u);
  EXPECT_EQ(f.get_u32("glm4moe.rope.dimension_count"), 32u);  // half of the 64-wide heads
  EXPECT_EQ(f.get_u32("glm4moe.expert_gating_func"), 2u);
  EXPECT_EQ(f.get_f32("glm4moe.expert_weights_scale"), 2.5f);
  EXPECT_EQ(f.get_u32("glm4moe.expert_shared_count"), 1u);
  EXPECT_EQ(f.get_u32("glm4moe.leading_dense_block_count"), 1u);
  for (const char* name : {"blk.0.attn_q.bias", "blk.0.post_attention_norm.weight",
                           "blk.1.exp_probs_b.bias", "blk.3.nextn.eh_proj.weight"}) {
    EXPECT_NE(f.find_tensor(name), nullptr) << name;
  }
  EXPECT_EQ(f.tensor("blk.0.attn_q_norm.weight").shape, std::vector<int64_t>{64});
  EXPECT_FALSE(read_model_info(f).hp.qk_norm_absent);
  // GLM-4.5-Air: no q/k norm, which the file says.
  SynthOptions air = small_new("glm4moe", "f32", "synth_glm4moe_air.gguf");
  air.qk_norm = 0;
  synthesize(air);
  expect_reads_back(air);
  gguf::File fa = gguf::File::open(air.out_path);
  EXPECT_EQ(fa.find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_TRUE(read_model_info(fa).hp.qk_norm_absent);

  // MiniMax-M2: one q/k norm weight per element of the whole row.
  SynthOptions mm = small_new("minimax-m2", "f32", "synth_minimax_layout.gguf");
  synthesize(mm);
  gguf::File fm = gguf::File::open(mm.out_path);
  EXPECT_EQ(fm.tensor("blk.0.attn_q_norm.weight").shape, std::vector<int64_t>{4 * 64});
  EXPECT_EQ(fm.tensor("blk.0.attn_k_norm.weight").shape, std::vector<int64_t>{2 * 64});
  EXPECT_EQ(fm.get_u32("minimax-m2.expert_gating_func"), 2u);  // the reference's default is softmax

  // GLM-5: mainline's MLA layout and the DSA indexer.
  SynthOptions g5 = small_new("glm-dsa", "q8_0", "synth_glm_dsa_layout.gguf");
  synthesize(g5);
  gguf::File fg = gguf::File::open(g5.out_path);
  EXPECT_EQ(fg.get_u32("glm-dsa.attention.head_count_kv"), 1u);
  EXPECT_EQ(fg.get_u32("glm-dsa.attention.key_length"), 64u + 32u);  // latent + rope key
  EXPECT_EQ(fg.get_u32("glm-dsa.attention.key_length_mla"), 96u);
  EXPECT_EQ(fg.get_u32("glm-dsa.attention.value_length_mla"), 64u);
  EXPECT_EQ(fg.get_u32("glm-dsa.attention.indexer.top_k"), 2048u);
  EXPECT_EQ(fg.find_tensor("blk.0.attn_kv_b.weight"), nullptr);
  EXPECT_EQ(fg.tensor("blk.0.attn_k_b.weight").shape, (std::vector<int64_t>{64, 64, 4}));
  EXPECT_EQ(fg.tensor("blk.0.indexer.attn_q_b.weight").shape, (std::vector<int64_t>{64, 32 * 128}));
  EXPECT_TRUE(read_model_info(fg).hp.mla_3d_b);
  // At any size the defaults are GLM-5's attention: 192 + 64 keys, 256 values, a 512 latent.
  SynthOptions big = small("glm-dsa", "f32", "unused.gguf");
  big.n_head_kv = 0;
  const HParams hp = synth_hparams(big, 1000);
  EXPECT_EQ(hp.head_dim, 256);
  EXPECT_EQ(hp.n_rot, 64);
  EXPECT_EQ(hp.head_dim_v, 256);
  EXPECT_EQ(hp.kv_lora_rank, 512);
  EXPECT_EQ(hp.n_indexer_head, 32);
  EXPECT_FALSE(hp.mla_kv_b);
}

}  // namespace
}  // namespace herd
