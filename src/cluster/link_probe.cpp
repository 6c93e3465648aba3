#include "cluster/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "util/error.h"

namespace herd::cluster {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRoundTrips = 5;
constexpr uint32_t kFirstBytes = 64 << 10;
constexpr double kEnoughSeconds = 5e-3;  // beyond the round trip: the bandwidth is seen
constexpr net::Millis kAnswerTimeout{10000};

// One PROBE carrying `data` and asking for `reply` bytes back; its seconds.
double round_trip(net::Connection& c, uint32_t reply, net::ConstBytes data, uint64_t id) {
  const auto start = Clock::now();
  net::send_message(c, id, net::Probe{reply, data});
  net::Frame frame;
  const net::Probe answer = net::recv_message<net::Probe>(c, kAnswerTimeout, frame);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (answer.data.size() != reply || frame.header.id != id) {
    throw Error("cluster", "node '" + c.peer_name() + "' answered a link probe of " +
                               std::to_string(reply) + " bytes with " +
                               std::to_string(answer.data.size()));
  }
  return seconds;
}

}  // namespace

LinkProfile measure_link(net::Connection& c, net::Millis budget) {
  const auto start = Clock::now();
  const auto spent = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const double limit = std::chrono::duration<double>(budget).count();
  uint64_t id = 1;
  LinkProfile link;
  link.rtt_seconds = 1e9;
  for (int i = 0; i < kRoundTrips; ++i) {
    link.rtt_seconds = std::min(link.rtt_seconds, round_trip(c, 0, {}, id++));
  }
  std::vector<uint8_t> data;
  // Grows the PROBE until its time shows the bandwidth; each direction gets half of what
  // is left of the budget. The rate is the last probe's: small ones may pass in a shaper's
  // burst at line rate. At least two are sent, so that a first one slowed by a process not
  // scheduled does not end the measurement with its rate.
  const auto bandwidth = [&](bool to_node) {
    const double until = spent() + (limit - spent()) / 2;
    uint32_t bytes = kFirstBytes;
    for (int probes = 1;; ++probes) {
      if (to_node && data.size() < bytes) data.resize(bytes);
      const double t = to_node ? round_trip(c, 0, net::ConstBytes(data.data(), bytes), id++)
                               : round_trip(c, bytes, {}, id++);
      const double transfer = std::max(t - link.rtt_seconds, 1e-7);
      const double rate = bytes / transfer;
      const bool enough =
          (transfer >= kEnoughSeconds && probes >= 2) || bytes == net::kMaxProbeBytes;
      // The next PROBE (4x the bytes) would take about 4x the transfer.
      if (enough || spent() + link.rtt_seconds + 4 * transfer > until) return rate;
      bytes = std::min<uint32_t>(bytes * 4, net::kMaxProbeBytes);
    }
  };
  link.send_bytes_per_s = bandwidth(true);
  link.receive_bytes_per_s = bandwidth(false);
  link.measured = true;
  return link;
}

std::map<std::pair<int, int>, LinkProfile> measure_node_links(
    const std::vector<NodeEnd>& ends, NodeLinks& known,
    const std::function<void(const std::string&)>& event, net::Millis budget) {
  const int n = static_cast<int>(ends.size());
  const auto end = [&](int i) -> const NodeEnd& { return ends[static_cast<size_t>(i)]; };
  const auto key = [&](int a, int b) {
    return end(a).address < end(b).address ? std::make_pair(end(a).address, end(b).address)
                                           : std::make_pair(end(b).address, end(a).address);
  };
  std::vector<std::pair<int, int>> todo;
  for (int a = 1; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (known.count(key(a, b)) == 0) todo.push_back({a, b});
    }
  }
  while (!todo.empty()) {
    // A round: pairs that share no node, measured at once.
    std::vector<std::pair<int, int>> round;
    std::vector<bool> busy(static_cast<size_t>(n), false);
    for (auto it = todo.begin(); it != todo.end();) {
      const auto [a, b] = *it;
      if (busy[static_cast<size_t>(a)] || busy[static_cast<size_t>(b)]) {
        ++it;
        continue;
      }
      busy[static_cast<size_t>(a)] = busy[static_cast<size_t>(b)] = true;
      round.push_back(*it);
      it = todo.erase(it);
    }
    for (const auto& [a, b] : round) {
      net::send_message(*end(a).connection, 0,
                        net::PeerProbe{static_cast<uint32_t>(budget.count()), end(b).address});
    }
    for (const auto& [a, b] : round) {
      net::Frame frame;
      const net::PeerLink got =
          net::recv_message<net::PeerLink>(*end(a).connection, budget + kAnswerTimeout, frame);
      LinkProfile link;  // a -> b as send
      if (got.reached) {
        link = {got.rtt_seconds, got.to_peer_bytes_per_s, got.from_peer_bytes_per_s, true};
      } else {
        event("node '" + end(a).name + "' cannot reach node '" + end(b).name + "' at " +
              end(b).address + ": " + net::printable(got.why));
      }
      if (end(a).address > end(b).address) {
        std::swap(link.send_bytes_per_s, link.receive_bytes_per_s);
      }
      known[key(a, b)] = link;
    }
  }
  std::map<std::pair<int, int>, LinkProfile> between;
  for (int a = 1; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      LinkProfile link = known.at(key(a, b));
      if (!link.measured) continue;
      if (end(a).address > end(b).address) {
        std::swap(link.send_bytes_per_s, link.receive_bytes_per_s);
      }
      between[{a, b}] = link;
    }
  }
  return between;
}

std::string link_text(const LinkProfile& link) {
  char text[128];
  std::snprintf(text, sizeof text, "%.2f ms round trip, %.2f / %.2f Gbit/s%s",
                link.rtt_seconds * 1e3, link.send_bytes_per_s * 8e-9,
                link.receive_bytes_per_s * 8e-9, link.measured ? "" : " (assumed)");
  return text;
}

}  // namespace herd::cluster
