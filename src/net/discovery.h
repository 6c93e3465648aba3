// LAN discovery of nodes with DNS-SD: `herd node` advertises a `_herd._tcp` service whose
// TXT record carries its profile, and `--peers auto` / `herd nodes` browse for them.
// Through the dns_sd API: Bonjour on macOS (in libSystem), Avahi's compatibility library
// plus a running avahi-daemon on Linux. A build without that library has the pure half
// (TXT codec, cluster id) and browse/advertise throw "[net] discovery: this build has no
// DNS-SD library" (dns_sd_none.cpp, chosen by CMake).
//
// TXT record (RFC 6763: a sequence of <u8 length><key=value> strings, each <= 255 bytes;
// keys case-insensitive, unknown keys ignored, the first of a repeated key wins):
//   txtvers=1
//   v=<protocol version>          kProtocolVersion of the node's herd
//   name=<node name>              printable ASCII, 1..kMaxNodeNameBytes
//   cluster=<16 hex digits>|none  cluster_id(): derived from the key, never the key
//   cores=<n>  mem=<free bytes>  bw=<GB/s>
//   models=<hash>,<hash>,...      16-hex prefixes of cached models' content hashes, newest
//                                 first, as many as fit in one 255-byte string
//   n_models=<n>                  how many the node has cached (models may list fewer)
//   id=<43 characters>            the node's identity (net/identity.h), for allow-lists;
//                                 optional, and unproven until a handshake signs it
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/auth.h"
#include "net/frame.h"
#include "net/identity.h"
#include "net/transport.h"

namespace herd::net {

inline constexpr const char* kServiceType = "_herd._tcp";
inline constexpr size_t kMaxTxtStringBytes = 255;
inline constexpr size_t kModelHashPrefixChars = 16;
inline constexpr int kDefaultDiscoverMs = 1500;

// What a node says about itself in its TXT record.
struct NodeAdvert {
  uint32_t version = kProtocolVersion;
  std::string name;
  std::string cluster = "none";  // cluster_id()
  int64_t cores = 0;             // 0: not said
  uint64_t free_memory_bytes = 0;
  double bandwidth_gbs = 0;
  std::vector<std::string> models;  // kModelHashPrefixChars lowercase hex digits each
  uint64_t n_models = 0;            // >= models.size()
  std::string id;                   // NodeId::to_text(); empty: not said

  bool operator==(const NodeAdvert&) const = default;
};

// The first 8 bytes (16 hex digits) of BLAKE2b (crypto_generichash) keyed by the cluster
// key over a fixed context string: equal for nodes that share a key, and revealing nothing
// of it. "none" without a key (insecure mode).
std::string cluster_id(const ClusterKey* key);

// The TXT record's bytes. Strings that would pass 255 bytes are cut: the name to
// kMaxNodeNameBytes, the model list to whole hashes that fit.
std::vector<uint8_t> encode_txt(const NodeAdvert& advert);
// Parses a TXT record from the network (hostile input). Throws herd::Error("[net] TXT
// record: ...") when a string overruns the record, or v, name or cluster is missing or
// malformed; numbers out of range and malformed hashes are errors too.
NodeAdvert decode_txt(ConstBytes txt);

// A node seen on the LAN.
struct DiscoveredNode {
  std::string instance;  // the DNS-SD service instance name
  std::string host;      // the host name it resolved to ("mini-2.local.")
  std::string address;   // its IPv4 address ("10.77.0.2"), what peers connect to
  uint16_t port = 0;
  NodeAdvert advert;

  std::string endpoint() const { return address + ":" + std::to_string(port); }
};

struct BrowseOptions {
  Millis wait{kDefaultDiscoverMs};  // how long to collect and resolve services
  std::string cluster;              // keep only nodes with this cluster id; empty: all
};

// Browses _herd._tcp for `wait`, resolving each service (host, port, TXT) and its host's
// IPv4 address. Services that were withdrawn meanwhile, did not resolve in time, or whose
// TXT record is malformed are left out. One entry per endpoint, sorted by name then
// endpoint. Throws herd::Error when there is no DNS-SD library or no mDNS daemon.
std::vector<DiscoveredNode> browse_nodes(const BrowseOptions& options);

// Advertises this node for as long as the object lives (a small thread answers the
// daemon). The daemon withdraws the service when this is destroyed or the process ends.
class NodeAdvertiser {
 public:
  // Advertises `instance` on `port` on the interfaces a socket bound to `listen_host`
  // receives on: every one for a wildcard ("0.0.0.0", "::", ""), else the one holding that
  // address, so that a node listening on 127.0.0.1 is seen on this machine only (on Linux;
  // macOS's mDNSResponder does not serve lo0, so there it is advertised everywhere) and
  // one listening on a Thunderbolt bridge is found, and reached, over the bridge.
  // Throws herd::Error when there is no DNS-SD library or no mDNS daemon. `log` hears
  // about the registration's outcome (a rename after a name conflict, a late failure).
  NodeAdvertiser(const std::string& instance, const std::string& listen_host, uint16_t port,
                 const NodeAdvert& advert, LogFn log);
  ~NodeAdvertiser();
  NodeAdvertiser(const NodeAdvertiser&) = delete;
  NodeAdvertiser& operator=(const NodeAdvertiser&) = delete;

  // Replaces the TXT record (DNSServiceUpdateRecord); nothing once the daemon reported the
  // registration lost (the log has said so). Thread-safe. Throws herd::Error when the
  // daemon refuses the update.
  void update(const NodeAdvert& advert);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The message for a missing mDNS daemon, shared by browse and advertise.
inline constexpr const char* kNoDaemonMessage =
    "discovery: no mDNS daemon is running (avahi-daemon on Linux): start it, or name peers "
    "with --peers HOST:PORT";

}  // namespace herd::net
