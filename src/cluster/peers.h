// Connecting to the nodes a command names with --peers: each connection completes the
// HELLO handshake (and the key check) and brings the node's PROFILE.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/transport.h"
#include "plan/node_profile.h"

namespace herd::cluster {

struct Peer {
  std::shared_ptr<net::Connection> connection;
  NodeProfile profile;  // address = the "host:port" it was reached at
};

// Connects to every address in order. Throws herd::Error naming the address that could not
// be reached, refused the key, or sent no profile within `timeout`.
std::vector<Peer> connect_peers(net::Transport& transport,
                                const std::vector<std::string>& addresses, net::Millis timeout);

}  // namespace herd::cluster
