// herd synth: write a random-weight model of a chosen shape and type (see model/synth.h).
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "model/arch.h"
#include "model/file_type.h"
#include "model/synth.h"
#include "util/progress.h"

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
  cmd->add_option("--ff", o->n_ff, "FFN width (default 3 x embd; per expert for MoE)");
  cmd->add_option("--layers", o->n_layer, "Number of blocks")->capture_default_str();
  cmd->add_option("--heads", o->n_head, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", o->n_head_kv, "KV heads (default heads / 2)");
  cmd->add_option("--head-dim", o->head_dim, "Head size (default embd / heads)");
  cmd->add_option("--ctx", o->n_ctx, "Context length written to the file")->capture_default_str();
  cmd->add_option("--experts", o->n_expert, "Experts per MoE layer")->capture_default_str();
  cmd->add_option("--experts-used", o->n_expert_used, "Experts used per token")
      ->capture_default_str();
  cmd->add_option("--expert-ff", o->n_ff_expert, "FFN width of one expert");
  cmd->add_option("--type", o->type, "Weight type: " + types)->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)");
  cmd->callback([o] {
    // Progress in thousandths of the tensor bytes written.
    Progress progress(stderr, "synth " + o->out_path, 1000);
    SynthOptions options = *o;
    options.progress = [&progress](uint64_t done, uint64_t total) {
      progress.update(done * 1000 / std::max<uint64_t>(total, 1));
    };
    synthesize(options);
    progress.finish();
  });
}

}  // namespace herd::cli
