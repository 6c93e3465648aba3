#include "cluster/peers.h"

#include <algorithm>

#include "util/error.h"

namespace herd::cluster {

std::vector<Peer> connect_peers(net::Transport& transport,
                                const std::vector<std::string>& addresses, net::Millis timeout) {
  std::vector<Peer> peers;
  for (const std::string& address : addresses) {
    Peer peer;
    try {
      peer.connection = transport.connect(address, timeout);
      net::Frame frame;
      const net::Profile p = net::recv_message<net::Profile>(*peer.connection, timeout, frame);
      peer.profile.name = p.node_name;
      peer.profile.address = address;
      peer.profile.cores = static_cast<int>(std::max<uint32_t>(1, p.cores));
      peer.profile.free_memory_bytes = p.free_memory;
      // A node that could not measure its bandwidth still gets a share.
      peer.profile.bandwidth_gbs = p.memory_bandwidth > 0 ? p.memory_bandwidth : 1;
      peer.profile.matmul_gflops = p.matmul_gflops;
    } catch (const Error& e) {
      throw Error("cluster", "peer " + address + ": " + e.what());
    }
    peers.push_back(std::move(peer));
  }
  return peers;
}

}  // namespace herd::cluster
