// herd rm org/repo[:QUANT]: removes a model from the store (every file of the repository
// without a quant); never touches the extra folders ($HERD_MODEL_PATH).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/store_options.h"
#include "util/error.h"

namespace herd::cli {

namespace {

struct RmArgs {
  std::vector<std::string> names;
  StoreFlags store;
};

}  // namespace

void add_rm(CLI::App& app) {
  auto a = std::make_shared<RmArgs>();
  CLI::App* cmd = app.add_subcommand(
      "rm", "Remove models from the model store: org/repo:QUANT, or org/repo for all of its files");
  cmd->add_option("names", a->names, "org/repo or org/repo:QUANT")->required();
  a->store.add_to(*cmd);
  cmd->callback([a] {
    const store::Store st = a->store.open();
    for (const std::string& text : a->names) {
      const std::optional<store::ModelName> name = store::parse_model_name(text);
      if (!name) throw Error("cli", "rm: '" + text + "' is not a model name (org/repo[:QUANT])");
      const std::vector<store::fs::path> removed = st.remove(*name);
      if (removed.empty()) {
        throw Error("cli", "rm: " + name->str() + " is not in the store " + st.root().string() +
                               " (herd ls lists it)");
      }
      for (const store::fs::path& p : removed)
        std::fprintf(stderr, "herd: removed %s\n", p.c_str());
    }
  });
}

}  // namespace herd::cli
