// The MPI transport under mpirun, and the choice of all-reduce for a tensor-parallel stage.
//   mpi_bench --allreduce N [--floats F]: N all-reduces of F floats across every rank, three
//     ways: herd's ring over MpiTransport channels (what herd runs), MPI_Allreduce, and
//     MPI_Allgather followed by a sum in rank order (the ring's small-vector arithmetic).
//     Reports microseconds per operation (rank 0's median of 5 rounds) and whether each gives
//     the ring's bits.
//   mpi_bench --gib G [--chunk-mib C]: rank 0 sends G GiB of C MiB WEIGHTS-sized frames to
//     rank 1 over a channel; GB/s (1 GB = 1e9 bytes).
// Usage: mpirun -n P mpi_bench ...   (P >= 2; docs/performance.md has the commands)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net/mpi_transport.h"
#include "net/ring.h"
#include "util/error.h"

namespace {

using namespace herd::net;
using Clock = std::chrono::steady_clock;

struct Args {
  int allreduce = 0;
  size_t floats = 2048;
  double gib = 0;
  size_t chunk_mib = 4;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--allreduce" && i + 1 < argc) {
      args.allreduce = std::atoi(argv[++i]);
    } else if (a == "--floats" && i + 1 < argc) {
      args.floats = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--gib" && i + 1 < argc) {
      args.gib = std::atof(argv[++i]);
    } else if (a == "--chunk-mib" && i + 1 < argc) {
      args.chunk_mib = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: mpi_bench --allreduce N [--floats F] | --gib G [--chunk-mib C]\n");
      std::exit(2);
    }
  }
  return args;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rank r's vector: values whose sums depend on the order they are added in.
void fill(std::vector<float>& v, int rank) {
  for (size_t j = 0; j < v.size(); ++j) {
    v[j] = 1.0f / static_cast<float>(1 + (j * 7 + static_cast<size_t>(rank) * 13) % 97) +
           static_cast<float>(rank) * 1e-3f;
  }
}

void allgather_sum(std::vector<float>& data, std::vector<float>& gathered, int p) {
  const size_t n = data.size();
  gathered.resize(n * static_cast<size_t>(p));
  MPI_Allgather(data.data(), static_cast<int>(n), MPI_FLOAT, gathered.data(), static_cast<int>(n),
                MPI_FLOAT, MPI_COMM_WORLD);
  std::copy_n(gathered.data(), n, data.data());
  for (int i = 1; i < p; ++i) {
    for (size_t k = 0; k < n; ++k) data[k] += gathered[static_cast<size_t>(i) * n + k];
  }
}

int run_allreduce(MpiTransport& t, const Args& args) {
  const int p = t.size();
  const int r = t.rank();
  auto next = t.connect(MpiTransport::address_of((r + 1) % p), Millis(30000));
  auto prev = t.accept(Millis(30000));
  if (!prev) throw herd::Error("bench", "no link from the previous rank");
  RingCollectives ring(r, p, next, prev);
  std::vector<float> data(args.floats), ref(args.floats), gathered;
  fill(ref, r);
  ring.all_reduce_sum(ref.data(), ref.size());  // the ring's bits, and a warm-up

  const char* names[3] = {"herd ring over MPI channels", "MPI_Allreduce",
                          "MPI_Allgather + rank-order sum"};
  for (int way = 0; way < 3; ++way) {
    std::vector<double> rounds;
    bool same = true;
    for (int round = 0; round < 5; ++round) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = Clock::now();
      for (int i = 0; i < args.allreduce; ++i) {
        fill(data, r);
        if (way == 0) ring.all_reduce_sum(data.data(), data.size());
        if (way == 1) {
          MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                        MPI_SUM, MPI_COMM_WORLD);
        }
        if (way == 2) allgather_sum(data, gathered, p);
      }
      rounds.push_back(seconds_since(start));
      same = same && std::memcmp(data.data(), ref.data(), data.size() * sizeof(float)) == 0;
    }
    std::sort(rounds.begin(), rounds.end());
    int all_same = same ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (r == 0) {
      std::printf("mpi_bench: %d ranks, %zu floats: %-31s %8.1f us each (%s the ring's bits)\n", p,
                  args.floats, names[way], 1e6 * rounds[2] / args.allreduce,
                  all_same ? "same as" : "NOT");
    }
  }
  next->close();
  prev->close();
  return 0;
}

int run_transfer(MpiTransport& t, const Args& args) {
  const size_t chunk = args.chunk_mib << 20;
  const uint64_t n = static_cast<uint64_t>(args.gib * (1ull << 30)) / chunk;
  if (t.rank() == 0) {
    auto c = t.connect(MpiTransport::address_of(1), Millis(30000));
    std::vector<uint8_t> data(chunk, 7);
    const auto start = Clock::now();
    for (uint64_t i = 0; i < n; ++i) c->send_frame(MessageType::WEIGHTS, i, data);
    c->recv_frame(Millis(60000));  // rank 1 has them all
    const double s = seconds_since(start);
    std::printf("mpi_bench: %llu frames of %zu MiB rank 0 -> 1: %.2f GB/s\n",
                static_cast<unsigned long long>(n), args.chunk_mib,
                static_cast<double>(n * chunk) / s / 1e9);
    c->close();
  } else if (t.rank() == 1) {
    auto c = t.accept(Millis(30000));
    if (!c) throw herd::Error("bench", "rank 0 did not connect");
    for (uint64_t i = 0; i < n; ++i) c->recv_frame(Millis(60000));
    c->send_frame(MessageType::READY, 0, {});
    try {
      c->recv_frame(Millis(60000));  // BYE
    } catch (const herd::Error&) {
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    MpiTransport t;
    if (t.size() < 2) throw herd::Error("bench", "run under mpirun -n 2 or more");
    return args.allreduce > 0 ? run_allreduce(t, args) : run_transfer(t, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_bench: %s\n", e.what());
    return 1;
  }
}
