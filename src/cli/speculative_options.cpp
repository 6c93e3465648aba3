#include "cli/speculative_options.h"

#include <cstdio>

#include "cli/store_options.h"

namespace herd::cli {

void SpeculativeOptions::add_to(CLI::App& cmd, const std::string& what, const std::string& note) {
  cmd.add_option("--lookup", lookup,
                 what + " by prompt lookup: up to K draft tokens per step from n-grams of the " +
                     "prompt and reply" + note)
      ->check(CLI::Range(0, 16));
  cmd.add_option("--draft", draft,
                 what +
                     " with a draft model: a smaller GGUF of the same vocabulary, run on "
                     "this machine");
  cmd.add_option("--draft-max", draft_max, "Draft-model tokens per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  cmd.add_option("--mtp", mtp,
                 what + " with the model's MTP head (its NextN layers; the model on the CPU): up " +
                     "to K draft tokens per step")
      ->check(CLI::Range(0, 16));
}

void SpeculativeOptions::warn_without_head(const engine::ModelRunner& model,
                                           const char* command) const {
  if (mtp > 0 && model.mtp_layers() == 0) {
    std::fprintf(stderr,
                 "%s: --mtp: the model has no MTP head here (no NextN layers, or not on this "
                 "machine's CPU); no MTP drafts\n",
                 command);
  }
}

std::optional<engine::SpeculativeParams> SpeculativeOptions::params() const {
  if (!enabled()) return std::nullopt;
  return engine::SpeculativeParams{lookup, 1, 3, draft.empty() ? 0 : draft_max, mtp};
}

std::unique_ptr<engine::ModelRunner> SpeculativeOptions::open_draft(
    const ModelOptions& options, const engine::ModelRunner& model, int64_t n_seq) const {
  if (draft.empty()) return nullptr;
  engine::LocalOptions lo = options.local_options(n_seq);
  lo.n_ctx = model.n_ctx();
  lo.upload_progress = nullptr;
  lo.mtp = false;  // the draft model's own head is not used
  return engine::LocalRunner::open(resolve_model_arg(draft), lo);
}

}  // namespace herd::cli
