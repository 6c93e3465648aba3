// herd synth: write a random-weight model of a chosen shape and type (see model/synth.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "gguf/split.h"
#include "model/arch.h"
#include "model/file_type.h"
#include "model/synth.h"
#include "util/progress.h"
#include "util/split_name.h"

namespace herd::cli {

void add_synth(CLI::App& app) {
  auto* cmd = app.add_subcommand("synth", "Write a synthetic (random-weight) GGUF model");
  auto o = std::make_shared<SynthOptions>();
  std::string archs, types;
  for (auto a : arch_names()) archs += (archs.empty() ? "" : "|") + std::string(a);
  for (auto t : file_type_names()) types += (types.empty() ? "" : "|") + std::string(t);
  cmd->add_option("--arch", o->arch, "Architecture: " + archs)->capture_default_str();
  cmd->add_option("-o,--out", o->out_path, "Output GGUF file")->required();
  cmd->add_option("--vocab", o->vocab_path,
                  "Take the tokenizer (and chat template) from this GGUF file instead of the "
                  "built-in byte-level vocabulary");
  cmd->add_option("--chat-template", o->chat_template_path,
                  "Write this chat template (a Jinja file) instead of the vocabulary's");
  cmd->add_option("--embd", o->n_embd, "Embedding width")->capture_default_str();
  cmd->add_option("--ff", o->n_ff,
                  "FFN width (default 3 x embd); MoE: of the dense layers, else of an expert");
  cmd->add_option("--layers", o->n_layer, "Number of blocks")->capture_default_str();
  cmd->add_option("--heads", o->n_head, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", o->n_head_kv, "KV heads (default heads / 2)");
  cmd->add_option("--head-dim", o->head_dim,
                  "Head size; MLA: the key size, nope + rope (default embd / heads, MLA 192 "
                  "from 128; glm4moe, minimax-m2 128; glm-dsa 256)");
  cmd->add_option("--ctx", o->n_ctx, "Context length written to the file")->capture_default_str();
  cmd->add_option("--experts", o->n_expert,
                  "Experts per MoE layer (default 8; gemma4: 128, 0 for a dense model)");
  cmd->add_option("--experts-used", o->n_expert_used,
                  "Experts used per token (default 4 for gpt-oss, else 2)");
  cmd->add_option("--expert-ff", o->n_ff_expert,
                  "FFN width of one expert (default --ff, or embd / 2 with dense layers)");
  cmd->add_option("--shared-experts", o->n_expert_shared,
                  "Shared experts every token runs through (deepseek2: 1)");
  cmd->add_option("--nextn,--mtp", o->n_nextn,
                  "NextN (MTP) blocks after --layers, kept for speculative decoding (default "
                  "as the family's converter writes them)");
  cmd->add_option("--dense-layers", o->n_leading_dense,
                  "Leading layers with a dense FFN --ff wide (deepseek2: 1)");
  cmd->add_option("--expert-groups", o->n_expert_group, "Expert groups (default 1)");
  cmd->add_option("--expert-groups-used", o->n_expert_group_used,
                  "Groups a token's experts come from (default half the groups)");
  cmd->add_option(
      "--gating", o->gating,
      "Router: softmax|sigmoid|sqrt-softplus (deepseek2: sigmoid, deepseek4: sqrt-softplus)");
  cmd->add_option("--expert-weights-scale", o->expert_weights_scale,
                  "Factor on the chosen experts' weights (deepseek2 sigmoid: 2.5)");
  cmd->add_option("--q-lora", o->q_lora_rank,
                  "MLA query rank; 0: plain attn_q (default embd / 2, 3 embd / 8 from 1024)");
  cmd->add_option("--kv-lora", o->kv_lora_rank,
                  "MLA latent size (default 512 from embd 1024, else embd / 2; glm-dsa 512)");
  cmd->add_option("--rope-dim", o->rope_dim,
                  "Dimensions of a head rope turns (default all; glm4moe, minimax-m2 half); MLA: "
                  "the rope part of a key (default 64 from 192-wide keys, else about key / 3, "
                  "leaving the nope part a multiple of 32)");
  cmd->add_option("--qk-norm", o->qk_norm,
                  "glm4moe: 0 leaves out the q/k norm (as GLM-4.5-Air), 1 writes it (default)");
  cmd->add_option("--head-dim-v,--v-head-dim", o->head_dim_v,
                  "MLA value size per head (default the key's nope part)");
  cmd->add_option("--window", o->sliding_window,
                  "Sliding window of the local layers; 0: none (gpt-oss 128, gemma3 512)");
  cmd->add_option("--per-layer-embd", o->n_embd_per_layer,
                  "gemma4: width of each layer's own input (E2B / E4B: 256; default 0)");
  cmd->add_option("--shared-kv-layers", o->n_kv_shared,
                  "gemma4: last layers that reuse an earlier layer's keys and values (default "
                  "about half with --per-layer-embd, else 0)");
  cmd->add_option("--global-every", o->sliding_period,
                  "gemma4: every this-many-th layer and the last are global (default 6, E2B / "
                  "E4B: 5)");
  cmd->add_option("--rope-scaling", o->rope_scaling,
                  "none|linear|yarn (deepseek2 yarn 40/4096, gpt-oss yarn 32/4096, gemma3 "
                  "linear 8)");
  cmd->add_option("--rope-factor", o->rope_factor, "Rope scaling factor");
  cmd->add_option("--rope-orig-ctx", o->rope_original_ctx, "YaRN: original context length");
  cmd->add_option("--yarn-log-mul", o->yarn_log_multiplier,
                  "YaRN: DeepSeek's mscale coefficient (deepseek2: 0.1)");
  cmd->add_option("--tied-output", o->tied_output,
                  "1: no output.weight, token_embd is the output matrix (default 1 for gemma3)");
  cmd->add_option("--linear-k-heads", o->delta_n_k_heads,
                  "Gated DeltaNet key heads (qwen35moe, qwen35, qwen3next; default heads / 2)");
  cmd->add_option("--linear-v-heads", o->delta_n_v_heads,
                  "Gated DeltaNet value heads (default heads)");
  cmd->add_option("--linear-head-dim", o->delta_head_dim,
                  "Gated DeltaNet key and value head size (default the attention head size)");
  cmd->add_option("--full-attention-interval", o->full_attention_interval,
                  "Every Nth layer is full attention, the others Gated DeltaNet (default 4)");
  cmd->add_option("--block-scale", o->block_scale,
                  "Spread of the blocks' output projections, times this; below 1 (e.g. 0.01) "
                  "with --tied-output 1, a model that repeats its last token (speculative "
                  "decoding at high acceptance)")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--type", o->type, "Weight type: " + types)->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)");
  auto split = std::make_shared<int>(1);
  cmd->add_option("--split", *split,
                  "Write the model as this many files, as llama.cpp's llama-gguf-split names them "
                  "(OUT without .gguf, then -00001-of-0000N.gguf ...), in place of --out")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->callback([o, split] {
    // Progress in thousandths of the tensor bytes written.
    Progress progress(stderr, "synth " + o->out_path, 1000);
    SynthOptions options = *o;
    options.progress = [&progress](uint64_t done, uint64_t total) {
      progress.update(done * 1000 / std::max<uint64_t>(total, 1));
    };
    synthesize(options);
    progress.finish();
    if (*split == 1) return;
    // Written whole first, then cut along tensors: a test tool, so the disk holds it twice
    // for a moment.
    {
      const gguf::File whole = gguf::File::open(o->out_path);
      for (const std::string& path : gguf::write_split(whole, model_stem(o->out_path), *split)) {
        std::fprintf(stderr, "synth: wrote %s\n", path.c_str());
      }
    }
    std::filesystem::remove(o->out_path);
  });
}

}  // namespace herd::cli
