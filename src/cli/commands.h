// One function per subcommand, each in its own file (src/cli/<command>.cpp). Each adds its
// subcommand to the app and sets the callback that runs it. Callbacks throw herd::Error on
// bad input; main() turns that into "herd: error: ..." and exit code 1.
#pragma once

#include <CLI/CLI.hpp>

namespace herd::cli {

void add_tokenize(CLI::App& app);
void add_chat_template(CLI::App& app);
void add_synth(CLI::App& app);
void add_inspect(CLI::App& app);
void add_eval(CLI::App& app);
void add_run(CLI::App& app);
void add_bench(CLI::App& app);
void add_plan(CLI::App& app);
void add_node(CLI::App& app);
void add_serve(CLI::App& app);
void add_nodes(CLI::App& app);
void add_hub(CLI::App& app);
void add_devices(CLI::App& app);
void add_pull(CLI::App& app);
void add_ls(CLI::App& app);
void add_rm(CLI::App& app);

}  // namespace herd::cli
