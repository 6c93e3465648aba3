// The node daemon (`herd node`): listens for a coordinator, tells it what this machine
// offers (PROFILE), loads the shard it is given (LOAD: from the model file when it has the
// same one, else from its cache, else by asking for the weights: WANT, WEIGHTS...), says
// READY, then runs FORWARD batches until the coordinator says BYE or goes away. One
// coordinator at a time: others are told BUSY. A broken or hostile peer ends its own
// session with a logged reason; the node keeps listening.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "kernels/matmul.h"
#include "net/auth.h"
#include "net/transport.h"
#include "plan/node_profile.h"
#include "store/store.h"

namespace herd::cluster {

struct NodeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;                           // 0: any free port (see NodeServer::port)
  std::string name;                            // empty: "<host name>:<port>"
  int threads = 0;                             // 0: all cores
  std::shared_ptr<const net::ClusterKey> key;  // null: insecure mode (loopback only)
  bool insecure_listen = false;
  std::shared_ptr<const net::NodeIdentity> identity;  // null: a fresh one per connection
  std::shared_ptr<const net::AllowList> allowed_ids;  // null: any coordinator or rank
  bool plaintext = false;           // --insecure: frames unencrypted (peers must say the same)
  std::filesystem::path cache_dir;  // empty: default_cache_dir()
  kernels::Isa isa_limit = kernels::Isa::kAvx512;
  std::string device = "cpu";  // --device: where a loaded part runs (engine::choose_device)
  // A part on a GPU, unless the plan splits it itself (assignment.h placement): "cpu" keeps
  // its routed experts on the CPU (--experts); device_layers >= 0 puts its first N layers on
  // the GPU and the rest on the CPU (--device-layers). Not for a tensor-parallel rank.
  std::string experts = "auto";
  int64_t device_layers = -1;
  double bandwidth_gbs = 0;         // 0: measured at start-up
  double matmul_gflops = 0;         // > 0: reported instead of measured (nodes sharing a machine)
  uint64_t memory_limit_bytes = 0;  // the most free memory to report; 0: what is free
  bool measure_matmul = true;       // false: report 0 GFLOP/s (the planner then uses bytes only)
  // Map the model when this machine has it (same content hash): its copy in own_store under
  // the name the coordinator gives, else the coordinator's file at the path it names
  // (cluster/local_model.h). false: always receive the weights (and use the cache).
  bool use_model_files = true;
  std::optional<store::Store> own_store;  // this node's model store; nullopt: none looked in
  net::Millis recv_timeout{600000};       // longest wait for a coordinator's next frame
  // Serve over this transport instead of listening on host:port (an MPI rank: its
  // coordinator is rank 0); `address` is what the profile says this node is reached at.
  std::shared_ptr<net::Transport> transport;
  std::string address;
  // Serve one coordinator, then return from run() (an MPI rank lives as long as its job).
  bool one_session = false;
  net::LogFn log;                                // what the node did and why it dropped peers
  std::chrono::microseconds test_link_delay{0};  // test only: net/delayed_connection.h
};

class NodeServer {
 public:
  // Binds the port and measures this machine. Throws herd::Error naming the problem.
  explicit NodeServer(NodeOptions options);
  ~NodeServer();
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  uint16_t port() const;  // 0 when serving over options.transport
  const NodeProfile& profile() const;

  // Serves coordinators until stop(). Returns after the current session has ended.
  void run();
  // Safe from any thread (and from a signal handler's flag-watching thread).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::cluster
