// herd pull org/repo[:QUANT]: the model into the store (cli/store_options.h says where),
// from a Hugging Face repository or a mirror ($HF_ENDPOINT). Prints the path of the model's
// (first) file on stdout.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/store_options.h"
#include "util/error.h"

namespace herd::cli {

namespace {

struct PullArgs {
  std::string name;
  StoreFlags store;
};

void pull(const PullArgs& a) {
  const std::optional<store::ModelName> name = store::parse_model_name(a.name);
  if (!name) {
    throw Error("cli", "pull: '" + a.name + "' is not a model name (org/repo or org/repo:QUANT)");
  }
  const store::Store st = a.store.open();
  const store::LocalModel local = store::pull(st, *name, pull_options(stderr));
  const std::string quant = local.model.quant.empty() ? "" : ":" + local.model.quant;
  std::fprintf(stderr, "herd: %s%s: %s in %zu file%s%s\n", name->repo_id().c_str(), quant.c_str(),
               store::format_size(local.model.total_size()).c_str(), local.paths.size(),
               local.paths.size() == 1 ? "" : "s",
               local.in_store ? "" : " (found outside the store: not copied)");
  std::printf("%s\n", local.paths.front().c_str());
}

}  // namespace

void add_pull(CLI::App& app) {
  auto a = std::make_shared<PullArgs>();
  CLI::App* cmd = app.add_subcommand(
      "pull",
      "Download a GGUF model from Hugging Face into the model store: org/repo picks the Q4_K_M "
      "file (else the only one), org/repo:QUANT the one of that quant (HF_TOKEN, HF_ENDPOINT; "
      "HERD_MODEL_PATH: folders searched first)");
  cmd->add_option("name", a->name, "org/repo or org/repo:QUANT")->required();
  a->store.add_to(*cmd);
  cmd->callback([a] { pull(*a); });
}

}  // namespace herd::cli
