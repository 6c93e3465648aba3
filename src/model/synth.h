// Synthetic models: random weights in a real GGUF file that herd and other GGUF readers
// load, for tests and benchmarks on machines that cannot download a model. The file is
// written tensor by tensor (never the whole model in memory), quantized with the same
// row quantizers as any other herd code, deterministically from the seed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/arch.h"

namespace herd {

struct SynthOptions {
  std::string arch = "llama";
  std::string out_path;
  std::string vocab_path;  // empty: the built-in byte-level vocabulary and ChatML template
  // A chat template file written instead of the vocabulary's (tests of a model family's
  // template with a vocabulary that ships none, or another version's); empty: none.
  std::string chat_template_path;
  std::string type = "f16";
  uint64_t seed = 1;
  int64_t n_embd = 256;
  int64_t n_ff = 0;  // 0: 3 * n_embd rounded to 64 (dense) or n_embd / 2 per expert (MoE)
  int64_t n_layer = 4;
  int64_t n_head = 8;
  int64_t n_head_kv = 0;  // 0: n_head / 2 (at least 1)
  int64_t head_dim = 0;   // 0: the row's (glm4moe, minimax-m2: 128), else n_embd / n_head
  int64_t n_ctx = 4096;
  int64_t n_expert = -1;      // -1: the architecture's (gemma4: 128, as 26B-A4B; else 8)
  int64_t n_expert_used = 0;  // 0: 4 for gpt-oss, else 2
  int64_t n_ff_expert = 0;    // 0: --ff, else n_embd / 2 (with dense layers: n_embd / 2)
  int tied_output = -1;       // -1: tied for gemma3 (as its converter writes it), else untied
  // Multiplies the spread of every block's output projection (attn_output, ffn_down and
  // its expert forms, ssm_out): below 1 the blocks add little to the embedding, and a model
  // with a tied output then predicts its last token again. Such a model's greedy reply
  // repeats, which measures speculative decoding at the acceptance a real model reaches
  // on repetitive text (random weights otherwise keep ~10% of drafts).
  float block_scale = 1.0f;
  // NextN (MTP) blocks appended after the --layers the forward pass runs; -1: as the
  // family's converter writes them (qwen35, glm4moe: 1; others 0).
  int64_t n_nextn = -1;
  // q/k norm of an architecture where it is optional (glm4moe: GLM-4.5 has it, GLM-4.5-Air
  // not): 0 leaves it out; -1: written.
  int qk_norm = -1;

  // Per-architecture options; a negative or empty value takes the architecture's default
  // (see synth_hparams), chosen to resemble the real models at any size.
  // Multi-head latent attention (deepseek2): head_dim is the key size, nope + rope.
  int64_t q_lora_rank = -1;   // 0: plain attn_q (V2-Lite); default embd / 2, 3 embd / 8 when large
  int64_t kv_lora_rank = -1;  // default 512 when embd >= 1024, else embd / 2
  // Rope part of a key: MLA's default 64 from 192-wide keys, else ~1/3; grouped-query
  // attention rotates the whole head unless the row says a part (glm4moe, minimax-m2: half).
  int64_t rope_dim = -1;
  int64_t head_dim_v = -1;  // value size per head; default the nope part of a key
  // Mixture of experts.
  int64_t n_expert_shared = -1;  // deepseek2: 1
  int64_t n_leading_dense = -1;  // deepseek2: 1 (0 when there is only one layer)
  int64_t n_expert_group = 0, n_expert_group_used = 0;  // 0: one group
  std::string gating;                                   // softmax|sigmoid; deepseek2: sigmoid
  float expert_weights_scale = -1;                      // deepseek2: 2.5, else 1
  // Attention window of the local layers (gpt-oss: 128, gemma3: 512, less for a short
  // context); 0: none. Only architectures with sliding-window layers take one.
  int64_t sliding_window = -1;
  // Gemma 4: each layer's own input of this width (the E2B / E4B models; default 0: none),
  // and the last layers that read an earlier layer's keys and values (default: with
  // per-layer inputs, about half the layers, as E2B / E4B; else 0). --experts 0 gives the
  // dense models (31B, E2B / E4B).
  int64_t n_embd_per_layer = -1;
  int64_t n_kv_shared = -1;
  // Gemma 4: every this-many-th layer (and the last) is global (default 6, 26B-A4B's 5:1;
  // E2B / E4B: 5).
  int64_t sliding_period = -1;
  // Rope scaling: none|linear|yarn. deepseek2: yarn 40 over 4096 with log-multiplier 0.1
  // (V3); gpt-oss: yarn 32 over 4096; gemma3: linear 8 (its global layers); else none.
  std::string rope_scaling;
  float rope_factor = -1;
  int64_t rope_original_ctx = -1;
  float yarn_log_multiplier = -1;
  // Gated DeltaNet layers (qwen35moe, qwen35, qwen3next): key heads (default heads / 2), value
  // heads (default heads), and the size of both (default the attention head size); layer il
  // is full attention iff (il + 1) % full_attention_interval == 0 (default 4; qwen3next is
  // fixed at 4). Their rope covers a quarter of the head unless --rope-dim says otherwise.
  int64_t delta_n_k_heads = -1, delta_n_v_heads = -1, delta_head_dim = -1;
  int64_t full_attention_interval = -1;
  int threads = 0;  // 0: all cores
  // progress(done_bytes, total_bytes); may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
};

// The hyper-parameters the options describe, with defaults filled in; throws herd::Error
// ("[synth] ...") naming the option when they are inconsistent.
HParams synth_hparams(const SynthOptions& options, int64_t n_vocab);

// Writes the model to options.out_path (atomically: a failure leaves no file).
void synthesize(const SynthOptions& options);

}  // namespace herd
