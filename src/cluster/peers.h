// Connecting to the nodes a command names with --peers: each connection completes the
// HELLO handshake (and the key check) and brings the node's PROFILE.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/messages.h"
#include "net/transport.h"
#include "plan/node_profile.h"

namespace herd::cluster {

struct Peer {
  std::shared_ptr<net::Connection> connection;
  NodeProfile profile;  // address = the "host:port" it was reached at
};

// The planner's view of a node from its PROFILE message, reached at `address`. Unified
// memory travels in details_json ({"unified_memory": true}); a missing or malformed
// details text means false (nodes before it existed), never an error.
NodeProfile profile_from_message(const net::Profile& p, const std::string& address);

// Connects to every address in order. Throws herd::Error naming the address that could not
// be reached, refused the key, or sent no profile within `timeout`.
std::vector<Peer> connect_peers(net::Transport& transport,
                                const std::vector<std::string>& addresses, net::Millis timeout);

// Connects to one node, as connect_peers does, waiting out a node that is still ending an
// earlier session (it answers BUSY) until `timeout`. nullopt, with `why` set, when the node
// cannot be reached, refuses the key or stays busy.
std::optional<Peer> try_connect_peer(net::Transport& transport, const std::string& address,
                                     net::Millis timeout, std::string& why);

}  // namespace herd::cluster
