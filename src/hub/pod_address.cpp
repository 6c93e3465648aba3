#include "hub/pod_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <vector>

#include "util/error.h"

namespace herd::hub {
namespace {

[[noreturn]] void bad_url(const std::string& problem) {
  throw Error("hub", "registration: field 'url': " + problem);
}

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// An IPv4 address (host order) within prefix/bits.
bool in4(uint32_t a, uint32_t prefix, int bits) {
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (a & mask) == (prefix & mask);
}

constexpr uint32_t v4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return a << 24 | b << 16 | c << 8 | d;
}

bool public_v4(uint32_t a) {
  struct Range {
    uint32_t prefix;
    int bits;
  };
  static constexpr Range kNotPublic[] = {
      {v4(0, 0, 0, 0), 8},        // "this network"
      {v4(10, 0, 0, 0), 8},       // private
      {v4(100, 64, 0, 0), 10},    // shared address space (carrier-grade NAT)
      {v4(127, 0, 0, 0), 8},      // loopback
      {v4(169, 254, 0, 0), 16},   // link-local (cloud metadata: 169.254.169.254)
      {v4(172, 16, 0, 0), 12},    // private
      {v4(192, 0, 0, 0), 24},     // IETF protocol assignments
      {v4(192, 0, 2, 0), 24},     // documentation
      {v4(192, 88, 99, 0), 24},   // 6to4 relay anycast
      {v4(192, 168, 0, 0), 16},   // private
      {v4(198, 18, 0, 0), 15},    // benchmarking
      {v4(198, 51, 100, 0), 24},  // documentation
      {v4(203, 0, 113, 0), 24},   // documentation
      {v4(224, 0, 0, 0), 4},      // multicast
      {v4(240, 0, 0, 0), 4},      // reserved, and broadcast
  };
  for (const Range& r : kNotPublic) {
    if (in4(a, r.prefix, r.bits)) return false;
  }
  return true;
}

uint32_t v4_at(const std::array<uint8_t, 16>& b, size_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 |
         uint32_t{b[at + 3]};
}

bool public_v6(const std::array<uint8_t, 16>& b) {
  auto zeros = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (b[i] != 0) return false;
    }
    return true;
  };
  // IPv4 inside IPv6: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d, also :: and ::1),
  // NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::): as the IPv4 address.
  if (zeros(0, 10) && b[10] == 0xff && b[11] == 0xff) return public_v4(v4_at(b, 12));
  if (zeros(0, 12)) return false;  // ::, ::1 and the deprecated compatible form
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zeros(4, 12)) {
    return public_v4(v4_at(b, 12));
  }
  if (b[0] == 0x20 && b[1] == 0x02) return public_v4(v4_at(b, 2));
  // Only global unicast (2000::/3) is routed; within it, the IETF's assignments (2001::/23:
  // Teredo, an IPv4 address hidden inside, benchmarking, ORCHID) and documentation
  // (2001:db8::/32) are not pods' addresses.
  if ((b[0] & 0xe0) != 0x20) return false;  // fc00::/7, fe80::/10, fec0::/10, ff00::/8, ...
  if (b[0] == 0x20 && b[1] == 0x01 && (b[2] <= 0x01 || (b[2] == 0x0d && b[3] == 0xb8))) {
    return false;
  }
  return true;
}

}  // namespace

std::string PodAddress::base_url() const {
  const bool v6 = host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

PodAddress parse_pod_url(std::string_view url) {
  PodAddress a;
  std::string_view rest;
  if (url.starts_with("http://")) {
    a.scheme = "http";
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    a.scheme = "https";
    rest = url.substr(8);
  } else {
    bad_url("not http:// or https://");
  }
  const size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (end != std::string_view::npos) {
    if (rest.find_first_not_of('/', end) != std::string_view::npos) {
      bad_url("a pod's URL is scheme://host[:port], without a path, query or fragment");
    }
  }
  if (authority.find('@') != std::string_view::npos) bad_url("a user name is not allowed");
  std::string_view port;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) bad_url("an IPv6 address without its ']'");
    a.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(":")) bad_url("'" + std::string(after) + "' after the IPv6 address");
      port = after.substr(1);
      if (port.empty()) bad_url("an empty port");
    }
    in6_addr parsed{};
    if (inet_pton(AF_INET6, a.host.c_str(), &parsed) != 1) {
      bad_url("'" + a.host + "' is not an IPv6 address");
    }
  } else {
    const size_t colon = authority.find(':');
    a.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) bad_url("an empty port");
    }
    if (a.host.empty() || a.host.size() > 253) {
      bad_url("a host of " + std::to_string(a.host.size()) + " bytes (1-253)");
    }
    for (char c : a.host) {
      if (!host_char(c)) bad_url("host '" + a.host + "' holds '" + std::string(1, c) + "'");
    }
  }
  if (port.empty()) {
    a.port = a.scheme == "https" ? 443 : 80;
  } else {
    const std::string shown(port.substr(0, 32));
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
      bad_url("port '" + shown + "' is not in 1..65535");
    }
    a.port = std::stoi(std::string(port));
    if (a.port < 1 || a.port > 65535) bad_url("port '" + shown + "' is not in 1..65535");
  }
  return a;
}

bool is_public_ip(std::string_view ip) {
  const std::string text(ip);
  in_addr a4{};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) return public_v4(ntohl(a4.s_addr));
  in6_addr a6{};
  if (inet_pton(AF_INET6, text.c_str(), &a6) == 1) {
    std::array<uint8_t, 16> b{};
    std::copy(std::begin(a6.s6_addr), std::end(a6.s6_addr), b.begin());
    return public_v6(b);
  }
  return false;
}

std::vector<std::string> resolve_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw Error("hub", "registration: field 'url': host '" + host + "' does not resolve (" +
                           gai_strerror(rc) + ")");
  }
  std::vector<std::string> out;
  for (const addrinfo* p = found; p != nullptr; p = p->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* at = nullptr;
    if (p->ai_family == AF_INET) at = &reinterpret_cast<const sockaddr_in*>(p->ai_addr)->sin_addr;
    if (p->ai_family == AF_INET6) {
      at = &reinterpret_cast<const sockaddr_in6*>(p->ai_addr)->sin6_addr;
    }
    if (at != nullptr && inet_ntop(p->ai_family, at, text, sizeof text) != nullptr) {
      out.emplace_back(text);
    }
  }
  freeaddrinfo(found);
  if (out.empty()) {
    throw Error("hub", "registration: field 'url': host '" + host + "' has no IP address");
  }
  return out;
}

void pin_pod_address(PodAddress& address, const std::vector<std::string>& resolved,
                     bool allow_private) {
  if (resolved.empty()) {
    throw Error("hub", "registration: field 'url': host '" + address.host + "' has no address");
  }
  for (const std::string& ip : resolved) {
    if (!allow_private && !is_public_ip(ip)) {
      throw Error("hub", "registration: field 'url': host '" + address.host + "' is at " + ip +
                             ", not a public address (private, loopback, link-local or "
                             "reserved: `herd hub --allow-private-pods` allows them)");
    }
  }
  address.ip = resolved.front();
  for (const std::string& ip : resolved) {
    if (ip.find(':') == std::string::npos) {
      address.ip = ip;
      break;
    }
  }
}

}  // namespace herd::hub
