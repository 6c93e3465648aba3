// --transport mpi: every rank of an mpirun job runs the same command line. Rank 0 goes on as
// the coordinator, with ranks 1..n-1 as its peers ("rank:N"); every other rank serves as a
// node (what `herd node` does, over MPI instead of TCP) until the coordinator is done, and
// then ends the command quietly: main() catches RankServed and exits 0, so a rank never
// prints the command's output twice.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/mpi_transport.h"

namespace herd::cli {

struct ModelOptions;

// Thrown on ranks 1..n-1 after they served their coordinator and finalised MPI.
struct RankServed {};

struct MpiCoordinator {
  std::shared_ptr<net::MpiTransport> transport;
  std::vector<std::string> peers;  // "rank:1", ..., "rank:n-1"
};

// Initialises MPI. On rank 0 returns the transport and the peers. On the other ranks serves
// as a node with `o`'s threads and kernels, then throws RankServed. Throws herd::Error when
// the build has no MPI, the job has one rank, or --peers is given too.
MpiCoordinator join_mpi_job(const ModelOptions& o);

}  // namespace herd::cli
