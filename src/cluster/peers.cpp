#include "cluster/peers.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace herd::cluster {

NodeProfile profile_from_message(const net::Profile& p, const std::string& address) {
  NodeProfile profile;
  profile.name = p.node_name;
  profile.address = address;
  profile.cores = static_cast<int>(std::clamp<uint32_t>(p.cores, 1, 1 << 20));
  profile.free_memory_bytes = p.free_memory;
  // A node that could not measure its bandwidth still gets a share.
  profile.bandwidth_gbs = p.memory_bandwidth > 0 ? p.memory_bandwidth : 1;
  profile.matmul_gflops = p.matmul_gflops;
  profile.total_memory_bytes = p.total_memory;
  const nlohmann::json details = nlohmann::json::parse(p.details_json, nullptr, false);
  if (details.is_object()) {
    const auto unified = details.find("unified_memory");
    profile.unified_memory =
        unified != details.end() && unified->is_boolean() && unified->get<bool>();
    // The node's GPUs; a node that describes them badly is planned as CPU-only.
    const auto devices = details.find("devices");
    if (devices != details.end()) {
      try {
        profile.devices = devices_from_json(*devices, "node " + address);
      } catch (const Error&) {
        profile.devices.clear();
      }
    }
  }
  return profile;
}

std::vector<Peer> connect_peers(net::Transport& transport,
                                const std::vector<std::string>& addresses, net::Millis timeout) {
  std::vector<Peer> peers;
  for (const std::string& address : addresses) {
    Peer peer;
    try {
      peer.connection = transport.connect(address, timeout);
      net::Frame frame;
      const net::Profile p = net::recv_message<net::Profile>(*peer.connection, timeout, frame);
      peer.profile = profile_from_message(p, address);
    } catch (const Error& e) {
      throw Error("cluster", "peer " + address + ": " + e.what());
    }
    peers.push_back(std::move(peer));
  }
  return peers;
}

std::optional<Peer> try_connect_peer(net::Transport& transport, const std::string& address,
                                     net::Millis timeout, std::string& why) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<net::Millis>(deadline - std::chrono::steady_clock::now());
    bool busy = false;
    try {
      Peer peer;
      peer.connection = transport.connect(address, std::max(left, net::Millis(100)));
      net::Frame frame = peer.connection->recv_frame(std::max(left, net::Millis(100)));
      if (frame.header.type == net::MessageType::ERROR) {
        const net::ErrorReply e = net::decode_error(frame.payload());
        busy = e.code == net::ErrorCode::BUSY;
        why = net::printable(e.message);
        peer.connection->close();
      } else {
        const net::Profile p = net::expect_message<net::Profile>(frame, address);
        peer.profile = profile_from_message(p, address);
        return peer;
      }
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!busy || std::chrono::steady_clock::now() + net::Millis(100) >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(net::Millis(100));
  }
}

}  // namespace herd::cluster
