// The speculative-decoding options of the commands that generate (run, serve, bench):
// --lookup K (prompt-lookup drafts), --draft MODEL and --draft-max K (a draft model), --mtp K
// (the model's own MTP head; it wins over the others, then the draft model: speculative.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/model_options.h"
#include "engine/runner.h"
#include "engine/speculative.h"

namespace herd::cli {

struct SpeculativeOptions {
  int lookup = 0;     // --lookup: prompt-lookup draft tokens per step (0: off)
  std::string draft;  // --draft: a draft model of the same vocabulary
  int draft_max = 4;  // --draft-max: its tokens per step
  int mtp = 0;        // --mtp: MTP-head draft tokens per step (0: off; loads the head)

  // `what` starts each option's help ("Speculative decoding", "Also measure speculative
  // decoding").
  void add_to(CLI::App& cmd, const std::string& what, const std::string& note = "");
  bool enabled() const { return lookup > 0 || !draft.empty() || mtp > 0; }
  // What a request asks for (each source that is on; the scheduler picks one); unset when
  // none is on.
  std::optional<engine::SpeculativeParams> params() const;
  // Has `model` load its MTP head where --mtp is on.
  void apply(ModelOptions& model) const { model.mtp = model.mtp || mtp > 0; }
  // Says on stderr when --mtp is on but `model` has no MTP head loaded (no NextN block, a
  // model not on this machine's CPU): requests then draft by the other sources, if any.
  void warn_without_head(const engine::ModelRunner& model, const char* command) const;
  // The draft model, on this machine beside `model`, with its context and `n_seq` slots (the
  // scheduler's draft follows the model's slots); null when --draft is not given.
  std::unique_ptr<engine::ModelRunner> open_draft(const ModelOptions& options,
                                                  const engine::ModelRunner& model,
                                                  int64_t n_seq) const;
};

}  // namespace herd::cli
