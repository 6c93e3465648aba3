// herd ls: the models in the store, one a line: name, quant, size, path.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/store_options.h"

namespace herd::cli {

void add_ls(CLI::App& app) {
  auto flags = std::make_shared<StoreFlags>();
  CLI::App* cmd = app.add_subcommand("ls", "List the models in the model store (herd pull)");
  flags->add_to(*cmd);
  cmd->callback([flags] {
    const store::Store st = flags->open();
    const std::vector<store::StoredModel> models = st.list();
    if (models.empty()) {
      std::fprintf(stderr, "herd: no models in %s (herd pull org/repo:QUANT)\n", st.root().c_str());
      return;
    }
    size_t w_name = 4, w_quant = 5;
    for (const store::StoredModel& m : models) {
      w_name = std::max(w_name, m.repo_id.size());
      w_quant = std::max(w_quant, m.quant.size() + (m.partial ? 10 : 0));
    }
    std::printf("%-*s  %-*s  %10s  %s\n", static_cast<int>(w_name), "NAME",
                static_cast<int>(w_quant), "QUANT", "SIZE", "PATH");
    for (const store::StoredModel& m : models) {
      std::string quant = m.quant.empty() ? "-" : m.quant;
      if (m.partial) quant += " (partial)";
      std::string size = store::format_size(m.size);
      if (m.n_files > 1) size += " /" + std::to_string(m.n_files);
      std::printf("%-*s  %-*s  %10s  %s\n", static_cast<int>(w_name), m.repo_id.c_str(),
                  static_cast<int>(w_quant), quant.c_str(), size.c_str(), m.path.c_str());
    }
  });
}

}  // namespace herd::cli
