// Where the hub may connect to a pod (issue 28, "Registrations"). A pod's registration
// names a URL; the hub calls it for every client request, check, load and round trip, so an
// anonymous registration must not make the hub call what the pod chooses:
//
//   the URL      scheme://host[:port][/] and nothing else: http or https, a host name, an
//                IPv4 address or a bracketed IPv6 one, a port in 1..65535 (default 80 or
//                443); no user, path, query or fragment. Checked with the registration's
//                other fields (registration.h): 400 naming the problem.
//   the address  the host is resolved once, when the pod registers that URL, and every
//                address it resolves to must be public (is_public_ip) unless the hub allows
//                private pods (`herd hub --allow-private-pods`: a pod network on a LAN, and
//                tests on loopback). The hub then connects to the address it checked, never
//                resolving the name again (pod_clients.h), so a name cannot point elsewhere
//                later (DNS rebinding).
//
// Pure but for resolve_host (getaddrinfo); thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace herd::hub {

struct PodAddress {
  std::string scheme;  // "http" or "https"
  std::string host;    // as the URL names it, without an IPv6 address's brackets
  int port = 0;        // 1..65535
  std::string ip;      // what the host resolved to (pin_pod_address): where the hub connects

  // scheme://host:port, the host bracketed when it is an IPv6 address.
  std::string base_url() const;
};

// Parses a pod's URL. Throws herd::Error("hub", "registration: field 'url': ...") naming the
// part that is wrong (a port 99999999999 is "not in 1..65535").
PodAddress parse_pod_url(std::string_view url);

// Whether the internet routes to this address (text: IPv4 dotted or IPv6): false for
// private (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10), loopback (127/8,
// ::1), link-local (169.254/16, fe80::/10), "this network" (0/8, ::), documentation,
// benchmarking, multicast and reserved ranges, and IPv4 addresses inside IPv6 ones
// (::ffff:0:0/96, ::/96, 64:ff9b::/96, 2002::/16) when the IPv4 address is one of those.
// Of IPv6, only global unicast (2000::/3) less the IETF's 2001::/23 (Teredo among them) and
// 2001:db8::/32 is public. False for text that is not an address.
bool is_public_ip(std::string_view ip);

// The addresses `host` resolves to (getaddrinfo; an address literal resolves to itself).
// Throws herd::Error("hub", "registration: field 'url': ...") when it does not resolve.
std::vector<std::string> resolve_host(const std::string& host);

// Sets `address.ip` to the address the hub will connect to, of those its host resolved to
// (the first IPv4 one, else the first IPv6 one). Throws herd::Error("hub", ...) naming the
// host and the address when one of them is not public and `allow_private` is false.
void pin_pod_address(PodAddress& address, const std::vector<std::string>& resolved,
                     bool allow_private);

}  // namespace herd::hub
