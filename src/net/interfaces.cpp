#include "net/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <fstream>

namespace herd::net {
namespace {

std::string speed_text(int64_t mbps) {
  if (mbps >= 1000 && mbps % 1000 == 0) return std::to_string(mbps / 1000) + " Gb/s";
  if (mbps >= 1000)
    return std::to_string(mbps / 1000) + "." + std::to_string(mbps % 1000 / 100) + " Gb/s";
  return std::to_string(mbps) + " Mb/s";
}

#if defined(__linux__)
int64_t sysfs_link_speed(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') return 0;
  std::ifstream in("/sys/class/net/" + name + "/speed");
  std::string line;  // reading fails (EINVAL) for devices without a link speed
  return std::getline(in, line) ? parse_link_speed(line) : 0;
}
#endif

}  // namespace

std::vector<NetInterface> list_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || (a->ifa_flags & IFF_UP) == 0) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr);
    if (inet_ntop(family, raw, text, sizeof text) == nullptr) continue;
    NetInterface i;
    i.name = a->ifa_name != nullptr ? a->ifa_name : "";
    i.address = text;
    i.ipv6 = family == AF_INET6;
    i.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
#if defined(__linux__)
    if (!i.loopback) i.speed_mbps = sysfs_link_speed(i.name);
#endif
    out.push_back(std::move(i));
  }
  freeifaddrs(list);
  return out;
}

std::vector<NetInterface> interfaces_for_host(std::string_view host,
                                              const std::vector<NetInterface>& all) {
  std::vector<NetInterface> out;
  for (const NetInterface& i : all) {
    const bool any_v4 = host == "0.0.0.0" && !i.ipv6;
    if (any_v4 || host == "::" || host == i.address) out.push_back(i);
  }
  return out;
}

std::string interface_kind(const NetInterface& i) {
  std::string kind;
  const auto add = [&kind](std::string_view k) {
    if (!kind.empty()) kind += ", ";
    kind += k;
  };
  if (i.name == "bridge0") add("Thunderbolt Bridge");
  if (i.name.rfind("thunderbolt", 0) == 0) add("Thunderbolt");
  if (!i.ipv6 && i.address.rfind("169.254.", 0) == 0) add("link-local");
  if (i.ipv6 && i.address.rfind("fe80:", 0) == 0) add("link-local");
  if (i.loopback) add("loopback");
  return kind;
}

std::string interfaces_text(const std::vector<NetInterface>& interfaces) {
  std::string text;
  for (const NetInterface& i : interfaces) {
    if (!text.empty()) text += "; ";
    // Appended piece by piece: `" " + string` trips GCC 12's -Wrestrict false positive.
    for (const std::string& part :
         {i.name, i.address, interface_kind(i), i.speed_mbps > 0 ? speed_text(i.speed_mbps) : ""}) {
      if (part.empty()) continue;
      if (!text.empty() && text.back() != ' ') text += ' ';
      text += part;
    }
  }
  return text;
}

int64_t parse_link_speed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  int64_t mbps = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mbps);
  if (ec != std::errc() || end != text.data() + text.size() || mbps <= 0) return 0;
  return mbps;
}

}  // namespace herd::net
