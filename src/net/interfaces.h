// The network interfaces a listening socket receives on, for `herd node` to say at start
// which link it serves over: "0.0.0.0:7070 (bridge0 169.254.20.1 Thunderbolt Bridge,
// link-local; en0 192.168.1.20; lo0 127.0.0.1 loopback)". getifaddrs on Linux and macOS;
// link speed from /sys/class/net/<name>/speed on Linux (macOS's getifaddrs keeps it in a
// 32-bit field that wraps above 4 Gb/s, so none is shown there).
// docs/portability.md lists the calls per system.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace herd::net {

struct NetInterface {
  std::string name;     // "eth0", "en5", "bridge0", "lo"
  std::string address;  // "169.254.20.1", "fe80::1" (no scope)
  bool ipv6 = false;
  bool loopback = false;
  int64_t speed_mbps = 0;  // link speed in Mb/s; 0 when unknown
};

// Every interface that is up, once per address (IPv4 and IPv6), in the OS's order. Empty
// when the OS will not say. Reads the OS (getifaddrs, and sysfs on Linux).
std::vector<NetInterface> list_interfaces();

// ---- pure, tested with made-up lists -----------------------------------------------------

// The interfaces a socket bound to `host` receives on: every IPv4 one for "0.0.0.0", every
// one for "::" (Asio's v6 socket takes IPv4 too), else those holding exactly that address.
std::vector<NetInterface> interfaces_for_host(std::string_view host,
                                              const std::vector<NetInterface>& all);

// What a person knows the link as, from its name and address: "Thunderbolt Bridge" (macOS
// names its bridge of the Thunderbolt ports bridge0), "Thunderbolt" (Linux's thunderbolt-net
// names thunderbolt0), "link-local" (169.254/16, what two Macs on one cable get without a
// DHCP server), "loopback"; "" for anything else. Comma-separated when several apply.
std::string interface_kind(const NetInterface& i);

// "bridge0 169.254.20.1 Thunderbolt Bridge, link-local; eth0 10.0.0.2 10 Gb/s; lo 127.0.0.1
// loopback"; "" for no interfaces.
std::string interfaces_text(const std::vector<NetInterface>& interfaces);

// The text of /sys/class/net/<name>/speed in Mb/s: "10000\n" -> 10000; "-1" (no link, or a
// virtual device) and anything malformed -> 0.
int64_t parse_link_speed(std::string_view text);

}  // namespace herd::net
