// Helpers of the synthesizer's tests: small option sets of each architecture and the check
// that a written file reads back as synth_hparams meant it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/file_type.h"
#include "model/model_info.h"
#include "model/synth.h"

namespace herd::synth_testing {

inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

inline SynthOptions small(const std::string& arch, const std::string& type,
                          const std::string& out) {
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

// Small shapes of the three architectures that main made data rows (deepseek2's MLA, gpt-oss,
// gemma3): head sizes that differ from embd / heads and rows that fit the quant blocks.
inline SynthOptions small_new(const std::string& arch, const std::string& type,
                              const std::string& out) {
  SynthOptions o = small(arch, type, out);
  o.n_embd = 128;
  o.n_ff = 256;
  o.n_layer = arch == "gemma3" ? 6 : 3;  // gemma3: five local layers, then a global one
  o.n_head_kv = arch == "deepseek2" || arch == "deepseek4" ? 0 : 2;
  o.head_dim = 64;
  o.n_expert = 8;
  o.n_expert_used = 0;  // the architecture's default (gpt-oss: 4)
  o.n_ff_expert = 64;
  o.n_ctx = 256;
  if (arch == "deepseek2" || arch == "glm-dsa") {
    o.n_head_kv = 0;
    o.head_dim = 96;  // 64 nope + 32 rope: k_b's rows of 64 fit q8_0 / q5_0 blocks
    o.rope_dim = 32;
  }
  if (arch == "glm-dsa") {  // GLM-5's 256-wide values and 512 latent are its defaults
    o.head_dim_v = 64;
    o.kv_lora_rank = 64;
  }
  return o;
}

// The file says what synth_hparams meant, and holds exactly the tensors of the arch's list.
inline void expect_reads_back(const SynthOptions& o) {
  gguf::File f = gguf::File::open(o.out_path);
  ModelInfo info = read_model_info(f);
  const int64_t n_vocab = info.hp.n_vocab;
  HParams want = synth_hparams(o, n_vocab);
  const HParams& got = info.hp;
  EXPECT_EQ(got.n_embd, want.n_embd);
  EXPECT_EQ(got.n_ff, want.n_ff);
  EXPECT_EQ(got.n_head, want.n_head);
  EXPECT_EQ(got.n_head_kv, want.n_head_kv);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.head_dim_v, want.head_dim_v);
  EXPECT_EQ(got.n_rot, want.n_rot);
  EXPECT_EQ(got.rms_eps, want.rms_eps);
  EXPECT_EQ(got.rope_base, want.rope_base);
  EXPECT_EQ(got.rope_scaling, want.rope_scaling);
  EXPECT_EQ(got.rope_factor, want.rope_factor);
  EXPECT_EQ(got.rope_original_ctx, want.rope_original_ctx);
  EXPECT_EQ(got.yarn_log_multiplier, want.yarn_log_multiplier);
  EXPECT_EQ(got.sliding_window, want.sliding_window);
  EXPECT_EQ(got.q_lora_rank, want.q_lora_rank);
  EXPECT_EQ(got.kv_lora_rank, want.kv_lora_rank);
  EXPECT_EQ(got.mla_kv_b, want.mla_kv_b);
  EXPECT_EQ(got.mla_split_b, want.mla_split_b);
  EXPECT_EQ(got.mla_3d_b, want.mla_3d_b);
  EXPECT_EQ(got.n_expert, want.n_expert);
  EXPECT_EQ(got.n_expert_used, want.n_expert_used);
  EXPECT_EQ(got.n_ff_expert, want.n_ff_expert);
  EXPECT_EQ(got.n_expert_shared, want.n_expert_shared);
  EXPECT_EQ(got.n_leading_dense, want.n_leading_dense);
  EXPECT_EQ(got.gating, want.gating);
  EXPECT_EQ(got.expert_weights_norm, want.expert_weights_norm);
  EXPECT_EQ(got.expert_weights_scale, want.expert_weights_scale);
  EXPECT_EQ(got.n_expert_group, want.n_expert_group);
  EXPECT_EQ(got.n_expert_group_used, want.n_expert_group_used);
  EXPECT_EQ(got.expert_selection_bias, want.expert_selection_bias);
  EXPECT_EQ(got.tied_output, want.tied_output);
  EXPECT_EQ(got.compress_ratios, want.compress_ratios);
  EXPECT_EQ(got.n_hc, want.n_hc);
  EXPECT_EQ(got.n_hash_layers, want.n_hash_layers);
  EXPECT_EQ(got.swiglu_limit, want.swiglu_limit);
  EXPECT_EQ(got.n_nextn, want.n_nextn);
  EXPECT_EQ(got.qk_norm_absent, want.qk_norm_absent);
  EXPECT_EQ(got.n_indexer_head, want.n_indexer_head);
  EXPECT_EQ(got.indexer_head_dim, want.indexer_head_dim);
  EXPECT_EQ(got.indexer_top_k, want.indexer_top_k);
  EXPECT_EQ(got.swa_layers, want.swa_layers);
  EXPECT_EQ(got.head_dim_swa, want.head_dim_swa);
  EXPECT_EQ(got.n_rot_swa, want.n_rot_swa);
  EXPECT_EQ(got.rope_base_swa, want.rope_base_swa);
  EXPECT_EQ(got.n_head_kv_of, want.n_head_kv_of);
  EXPECT_EQ(got.n_ff_of, want.n_ff_of);
  EXPECT_EQ(got.n_kv_shared, want.n_kv_shared);
  EXPECT_EQ(got.n_embd_per_layer, want.n_embd_per_layer);
  EXPECT_EQ(got.final_softcap, want.final_softcap);
  EXPECT_EQ(got.global_v_is_k, want.global_v_is_k);
  std::vector<TensorSpec> specs = model_tensors(*info.arch, want);
  // Gemma 4's proportional rope divisors come last (not in the model's tensor list).
  if (info.arch->synth.rope_freqs_rotated > 0) {
    specs.push_back({"rope_freqs.weight", {want.n_rot / 2}, TensorRole::kNorm});
  }
  ASSERT_EQ(f.tensors().size(), specs.size());
  ASSERT_EQ(info.tensors.size() + (info.has_rope_freqs ? 1 : 0), specs.size());
  const FileType ft = *find_file_type(o.type);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(f.tensors()[i].name, specs[i].name);
    EXPECT_EQ(f.tensors()[i].shape, specs[i].shape) << specs[i].name;
    EXPECT_EQ(f.tensors()[i].type, tensor_type_for(ft, specs[i], want)) << specs[i].name;
  }
}

}  // namespace herd::synth_testing
