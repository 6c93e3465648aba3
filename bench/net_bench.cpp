// Loopback throughput of the TCP transport: ships `--gib` GiB of WEIGHTS chunks of
// `--chunk-mib` MiB from one TcpTransport to another in the same process and reports GB/s
// (1 GB = 1e9 bytes) for the whole transfer, hashing included (the sender computes each
// chunk's XXH3 and the receiver verifies it, as weight shipping does).
// With --allreduce N it instead times N ring all-reduces of --floats values between two
// ranks over loopback TCP (what a tensor-parallel pair does twice per layer per token).
// Frames are encrypted as between nodes (XChaCha20-Poly1305) unless --insecure.
// Usage: net_bench [--gib N] [--chunk-mib N] [--socket-buffer-kib N] [--no-hash] [--insecure]
//        net_bench --allreduce N [--floats N] [--insecure]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "net/messages.h"
#include "net/ring.h"
#include "net/tcp_transport.h"
#include "util/error.h"

namespace {

using namespace herd::net;

struct Args {
  double gib = 1;
  uint64_t chunk_mib = 16;
  bool hash = true;
  int socket_buffer_kib = 0;  // 0: kernel autotuning
  int allreduce = 0;          // > 0: all-reduce latency mode, this many operations
  size_t floats = 2048;
  bool insecure = false;  // plaintext frames
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gib" && i + 1 < argc) {
      args.gib = std::atof(argv[++i]);
    } else if (a == "--chunk-mib" && i + 1 < argc) {
      args.chunk_mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--socket-buffer-kib" && i + 1 < argc) {
      args.socket_buffer_kib = std::atoi(argv[++i]);
    } else if (a == "--no-hash") {
      args.hash = false;
    } else if (a == "--insecure") {
      args.insecure = true;
    } else if (a == "--allreduce" && i + 1 < argc) {
      args.allreduce = std::atoi(argv[++i]);
    } else if (a == "--floats" && i + 1 < argc) {
      args.floats = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: net_bench [--gib N] [--chunk-mib N] [--socket-buffer-kib N] [--no-hash] "
                   "[--insecure]\n");
      std::exit(2);
    }
  }
  return args;
}

// Two ranks, one link: rank 0 dials rank 1; each runs all-reduces in its own thread.
int run_allreduce(const Args& args) {
  TcpTransportOptions options;
  options.auth = AuthConfig{"rank-1", nullptr};
  options.auth.plaintext = args.insecure;
  TcpTransport one(options);
  one.listen(ListenOptions{});
  options.auth.node_name = "rank-0";
  TcpTransport zero(options);
  auto link0 = zero.connect("127.0.0.1:" + std::to_string(one.port()), Millis(5000));
  auto link1 = one.accept(Millis(5000));
  if (!link1) throw herd::Error("bench", "no connection");
  RingCollectives ring0(0, 2, link0, link0), ring1(1, 2, link1, link1);
  auto loop = [&](RingCollectives& ring) {
    std::vector<float> data(args.floats, 1.0f);
    for (int i = 0; i < args.allreduce; ++i) ring.all_reduce_sum(data.data(), data.size());
  };
  auto start = std::chrono::steady_clock::now();
  auto other = std::async(std::launch::async, [&] { loop(ring1); });
  loop(ring0);
  other.get();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "net_bench: %d all-reduces of %zu floats between 2 ranks over loopback TCP: %.1f us each\n",
      args.allreduce, args.floats, 1e6 * seconds / args.allreduce);
  return 0;
}

int run(const Args& args) {
  if (args.allreduce > 0) return run_allreduce(args);
  const uint64_t chunk = args.chunk_mib << 20;
  const uint64_t total = static_cast<uint64_t>(args.gib * (1ull << 30));
  const uint64_t n_chunks = (total + chunk - 1) / chunk;
  if (chunk == 0 || chunk > kMaxWeightsChunkBytes) {
    std::fprintf(stderr, "net_bench: --chunk-mib must be 1..64\n");
    return 2;
  }
  // The source stands for a model file mapped in memory: one buffer as large as the
  // transfer (up to 1 GiB, then reused), sent front to back so that the sender reads from
  // memory, not from a cache-resident chunk.
  const uint64_t source_bytes = std::min<uint64_t>(n_chunks * chunk, 1ull << 30);
  std::vector<uint8_t> source(source_bytes);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 31 + 7);
  const uint64_t chunks_in_source = source_bytes / chunk;

  TcpTransportOptions options;
  options.auth = AuthConfig{"bench-receiver", nullptr};
  options.auth.plaintext = args.insecure;
  options.tcp.socket_buffer_bytes = args.socket_buffer_kib * 1024;
  TcpTransport receiver(options);
  receiver.listen(ListenOptions{});
  options.auth.node_name = "bench-sender";
  TcpTransport sender(options);
  auto to_receiver = sender.connect("127.0.0.1:" + std::to_string(receiver.port()), Millis(5000));
  auto from_sender = receiver.accept(Millis(5000));
  if (!from_sender) throw herd::Error("bench", "no connection");

  auto start = std::chrono::steady_clock::now();
  auto received = std::async(std::launch::async, [&] {
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n_chunks; ++i) {
      Frame frame = from_sender->recv_frame(Millis(10000));
      if (args.hash) {
        bytes += expect_message<Weights>(frame, from_sender->peer_name()).data.size();
      } else {
        bytes += frame.header.length;
      }
    }
    return bytes;
  });
  for (uint64_t i = 0; i < n_chunks; ++i) {
    uint64_t n = std::min(chunk, total - i * chunk);
    ConstBytes data(source.data() + (i % chunks_in_source) * chunk, n);
    send_message(
        *to_receiver, i,
        Weights{"blk.0.ffn_up.weight", i * chunk, total, args.hash ? chunk_hash(data) : 0, data});
  }
  uint64_t bytes = received.get();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "net_bench: %.2f GiB in %llu chunks of %llu MiB over loopback TCP%s, %s: %.3f s, %.2f "
      "GB/s\n",
      bytes / double(1ull << 30), static_cast<unsigned long long>(n_chunks),
      static_cast<unsigned long long>(args.chunk_mib), args.hash ? " (hash verified)" : "",
      args.insecure ? "plaintext" : "encrypted", seconds, bytes / seconds / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "net_bench: %s\n", e.what());
    return 1;
  }
}
