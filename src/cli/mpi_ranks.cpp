#include "cli/mpi_ranks.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "cli/model_options.h"
#include "cluster/node.h"
#include "util/error.h"

namespace herd::cli {
namespace {

// Ranks 1..n-1 log as `herd node` does, naming their rank: under mpirun every rank's stderr
// goes to the same terminal.
void serve_as_node(const std::shared_ptr<net::MpiTransport>& transport, const ModelOptions& o) {
  const std::string address = net::MpiTransport::address_of(transport->rank());
  const std::string prefix = "herd " + address + ": ";
  cluster::NodeOptions node;
  node.transport = transport;
  node.address = address;
  char host[256] = {};
  const bool named = gethostname(host, sizeof host - 1) == 0 && host[0] != '\0';
  node.name = address + "@" + (named ? host : "node");
  node.threads = o.threads;
  node.isa_limit = o.local_options(1).isa_limit;
  node.one_session = true;
  node.bandwidth_gbs = o.cluster.rank_bandwidth_gbs;
  node.matmul_gflops = o.cluster.rank_matmul_gflops;
  node.log = [prefix](std::string_view line) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
    std::fprintf(stderr, "%s %s%.*s\n", stamp, prefix.c_str(), static_cast<int>(line.size()),
                 line.data());
    std::fflush(stderr);
  };
  cluster::NodeServer server(node);
  // The coordinator may end (or fail) without ever connecting to this rank: its transport
  // says FINISH, and this rank stops waiting.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && !transport->finished(0))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.stop();
  });
  try {
    server.run();
  } catch (...) {
    done = true;
    watcher.join();
    throw;
  }
  done = true;
  watcher.join();
}

}  // namespace

MpiCoordinator join_mpi_job(const ModelOptions& o) {
  if (!o.cluster.peers.empty()) {
    throw Error("cli", "--transport mpi takes its nodes from mpirun (ranks 1..n-1), not --peers");
  }
  auto transport = std::make_shared<net::MpiTransport>();
  if (transport->size() < 2) {
    throw Error("cli",
                "--transport mpi: the job has one rank; start herd with mpirun -n N "
                "(N >= 2: rank 0 coordinates, the others serve as nodes)");
  }
  if (transport->rank() != 0) {
    serve_as_node(transport, o);
    transport.reset();  // waits for every rank, then MPI_Finalize
    throw RankServed{};
  }
  MpiCoordinator job;
  for (int r = 1; r < transport->size(); ++r) job.peers.push_back(net::MpiTransport::address_of(r));
  job.transport = std::move(transport);
  return job;
}

}  // namespace herd::cli
