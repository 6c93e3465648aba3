// Measuring the link to a node when a session starts: round trip and bandwidth each way,
// with PROBE frames (net/messages.h) over the session's own connection, before LOAD.
// The planner's predictions (plan/predict.h) use the figures; `herd plan` and the live
// view show them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "net/transport.h"

#include "plan/predict.h"

namespace herd::cluster {

// Round trip: the fastest of 5 empty PROBEs. Bandwidth each way: PROBEs of 64 KiB, then 4x
// larger each time until one after the first takes 5 ms beyond the round trip (or 16 MiB),
// the bytes over that time. About 3 x (5 to 10 ms) on a fast link; on a slow one at most `budget`
// in all (a larger PROBE is not sent when the last one's time says it would not fit). Throws
// herd::Error naming the peer when the connection fails or the node answers otherwise.
LinkProfile measure_link(net::Connection& connection, net::Millis budget = net::Millis(300));

// "0.12 ms round trip, 9.8 / 10.1 Gbit/s" (to the node / from it).
std::string link_text(const LinkProfile& link);

// Links between nodes by their addresses (first < second; send is first -> second).
using NodeLinks = std::map<std::pair<std::string, std::string>, LinkProfile>;

// A node as measure_node_links() sees it: its name, address and the coordinator's
// connection to it.
struct NodeEnd {
  std::string name;
  std::string address;
  std::shared_ptr<net::Connection> connection;
};

// The links between nodes, on which stage links and rings run: for each pair not in
// `known`, the node listed first is asked to dial the other and probe it (PEER_PROBE,
// answered by PEER_LINK, `budget` for both ways); pairs that share no node are measured at
// the same time. Adds what it measured to `known` (a pair whose node could not reach the
// other is kept as not measured, and `event` says why: its stage link would fail the
// same way). Returns the measured links by index pair (a < b, both >= 1; ends[0] is the
// coordinator, unused), as Links::between takes them. Throws herd::Error when a node's
// connection fails.
std::map<std::pair<int, int>, LinkProfile> measure_node_links(
    const std::vector<NodeEnd>& ends, NodeLinks& known,
    const std::function<void(const std::string&)>& event, net::Millis budget = net::Millis(200));

}  // namespace herd::cluster
