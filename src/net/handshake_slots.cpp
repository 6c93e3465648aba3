#include "net/handshake_slots.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "util/error.h"

namespace herd::net {

std::string slot_address(std::string_view address) {
  std::string_view host = address;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    host = close == std::string_view::npos ? host.substr(1) : host.substr(1, close - 1);
  } else if (host.find(':') == host.rfind(':') && host.find(':') != std::string_view::npos) {
    host = host.substr(0, host.find(':'));  // "host:port"; a bare IPv6 has several colons
  }
  const std::string text(host);
  std::array<uint8_t, 16> v6{};
  if (inet_pton(AF_INET6, text.c_str(), v6.data()) != 1) return text;
  const std::array<uint8_t, 12> v4_mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(v4_mapped.begin(), v4_mapped.end(), v6.begin())) {
    char v4[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, v6.data() + 12, v4, sizeof v4);
    return v4;  // the same peer as its IPv4 address
  }
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%x:%x:%x:%x::/64", v6[0] << 8 | v6[1], v6[2] << 8 | v6[3],
                v6[4] << 8 | v6[5], v6[6] << 8 | v6[7]);
  return prefix;
}

HandshakeSlots::HandshakeSlots(HandshakeSlotLimits limits) : limits_(limits) {
  HERD_CHECK(limits_.total >= 1);
  HERD_CHECK(limits_.per_address >= 1 && limits_.per_address <= limits_.total);
}

HandshakeSlots::Id HandshakeSlots::victim(const std::string* address) const {
  std::optional<Id> oldest;
  for (const auto& [id, slot] : slots_) {
    if (address && slot.address != *address) continue;
    if (!slot.heard_hello) return id;
    if (!oldest) oldest = id;
  }
  HERD_CHECK(oldest);
  return *oldest;
}

HandshakeSlots::Admission HandshakeSlots::admit(const std::string& address) {
  Admission admission{next_++, std::nullopt};
  if (count(address) >= limits_.per_address) {
    admission.evicted = victim(&address);
  } else if (slots_.size() >= limits_.total) {
    admission.evicted = victim(nullptr);
  }
  if (admission.evicted) release(*admission.evicted);
  slots_.emplace(admission.id, Slot{address});
  ++per_address_[address];
  return admission;
}

void HandshakeSlots::heard_hello(Id id) {
  const auto slot = slots_.find(id);
  if (slot != slots_.end()) slot->second.heard_hello = true;
}

void HandshakeSlots::release(Id id) {
  const auto slot = slots_.find(id);
  if (slot == slots_.end()) return;
  const auto held = per_address_.find(slot->second.address);
  if (--held->second == 0) per_address_.erase(held);
  slots_.erase(slot);
}

bool HandshakeSlots::holds(Id id) const {
  return slots_.count(id) != 0;
}

size_t HandshakeSlots::count(const std::string& address) const {
  const auto held = per_address_.find(address);
  return held == per_address_.end() ? 0 : held->second;
}

}  // namespace herd::net
