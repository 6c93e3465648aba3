// herd: one binary, one subcommand per job.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "cli/mpi_ranks.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"herd: run large language models on a herd of ordinary computers"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");

  herd::cli::add_tokenize(app);
  herd::cli::add_chat_template(app);
  herd::cli::add_synth(app);
  herd::cli::add_inspect(app);
  herd::cli::add_run(app);
  herd::cli::add_eval(app);
  herd::cli::add_bench(app);
  herd::cli::add_plan(app);
  herd::cli::add_node(app);
  herd::cli::add_serve(app);
  herd::cli::add_nodes(app);
  herd::cli::add_hub(app);
  herd::cli::add_devices(app);
  herd::cli::add_pull(app);
  herd::cli::add_ls(app);
  herd::cli::add_rm(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const herd::cli::RankServed&) {
    return 0;  // an MPI rank that served as a node: the command's output is rank 0's
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "herd: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
