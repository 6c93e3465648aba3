// Weight shipping over loopback TCP, end to end: ship_weights sends every tensor of a GGUF
// file from one TcpTransport and receive_weights writes them into a cache file through
// another, in the same process, as a coordinator and a `herd node --no-model-files` do.
// Reports the sender's time (what the coordinator's progress line shows) and the time
// until the received file is complete and renamed into place, in GB/s (1 GB = 1e9 bytes).
// Each repeat ships the file twice, encrypted (as between nodes) and then plaintext (as
// with --insecure: WEIGHTS data spliced from the socket into the file), so both figures
// come from the same moment's machine; --mode picks one of them.
// Usage: ship_bench --model FILE --out FILE [--repeat N] [--mode both|encrypted|plaintext]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>

#include <unistd.h>

#include "cluster/shipping.h"
#include "net/tcp_transport.h"
#include "util/error.h"

namespace {

using namespace herd;

struct Args {
  std::string model;
  std::string out;
  int repeat = 1;
  std::string mode = "both";
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      args.model = argv[++i];
    } else if (a == "--out" && i + 1 < argc) {
      args.out = argv[++i];
    } else if (a == "--repeat" && i + 1 < argc) {
      args.repeat = std::atoi(argv[++i]);
    } else if (a == "--mode" && i + 1 < argc) {
      args.mode = argv[++i];
    } else {
      args.model.clear();
      break;
    }
  }
  if (args.model.empty() || args.out.empty() ||
      (args.mode != "both" && args.mode != "encrypted" && args.mode != "plaintext")) {
    std::fprintf(stderr,
                 "usage: ship_bench --model FILE --out FILE [--repeat N] "
                 "[--mode both|encrypted|plaintext]\n");
    std::exit(2);
  }
  return args;
}

int run(const Args& args) {
  const gguf::File file = gguf::File::open(args.model);
  const ModelInfo info = read_model_info(file);
  cluster::Assignment a;
  for (const gguf::TensorInfo& t : file.tensors()) {
    a.tensors.push_back({std::string(t.name), t.type, t.shape});
  }

  std::vector<bool> modes;  // plaintext?
  if (args.mode != "plaintext") modes.push_back(false);
  if (args.mode != "encrypted") modes.push_back(true);
  for (int i = 0; i < args.repeat; ++i) {
    for (const bool plaintext : modes) {
      net::TcpTransportOptions options;
      options.auth = net::AuthConfig{"bench-node", nullptr};
      options.auth.plaintext = plaintext;
      net::TcpTransport node(options);
      node.listen(net::ListenOptions{});
      options.auth.node_name = "bench-coordinator";
      net::TcpTransport coordinator(options);
      std::filesystem::remove(args.out);
      // The previous run's file is still being written back to disk: let that finish
      // first, or its writeback shares the CPU with this run (each run then measures the
      // one before).
      ::sync();
      auto to_node =
          coordinator.connect("127.0.0.1:" + std::to_string(node.port()), net::Millis(5000));
      auto from_coordinator = node.accept(net::Millis(5000));
      if (!from_coordinator) throw Error("bench", "no connection");
      const auto start = std::chrono::steady_clock::now();
      uint64_t placed = 0;
      auto received = std::async(std::launch::async, [&] {
        placed = cluster::receive_weights(*from_coordinator, a, args.out, net::Millis(10000))
                     .placed_bytes;
        return std::chrono::steady_clock::now();
      });
      const cluster::ShipStats sent = cluster::ship_weights(*to_node, file, info, a);
      const double end_to_end = std::chrono::duration<double>(received.get() - start).count();
      std::printf(
          "ship_bench %-9s: %.1f MB in %zu tensors: sent in %.3f s (%.2f GB/s), file complete "
          "in %.3f s (%.2f GB/s), %.1f MB placed straight into it (%s)\n",
          plaintext ? "plaintext" : "encrypted", sent.bytes / 1e6, a.tensors.size(), sent.seconds,
          sent.bytes / sent.seconds / 1e9, end_to_end, sent.bytes / end_to_end / 1e9, placed / 1e6,
          plaintext ? "spliced" : "opened, then pwrite");
      to_node->close();
      from_coordinator->close();
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ship_bench: %s\n", e.what());
    return 1;
  }
}
