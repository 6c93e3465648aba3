// Handshake slots: which unauthenticated connections a node spends a handshake on.
//
// Before its HELLO exchange completes, a connection has proved nothing, and each one costs
// the node a thread for up to the handshake deadline. Slots bound that cost without letting
// a flood of half-open connections keep the node's own coordinator out:
//   - at most `total` handshakes at once, and at most `per_address` from one address
//     (an IPv4 address, or an IPv6 /64: what one attacker usually holds);
//   - a newcomer is never refused for want of a slot: when its address is at its cap, the
//     oldest handshake of that address is evicted; otherwise, when every slot is taken, the
//     oldest handshake of all is. Among those, one whose peer has not yet sent a whole
//     first HELLO goes before one that has (heard_hello), so a flood of partial HELLOs
//     never evicts a peer that is answering. A completed handshake leaves its slot at
//     once, so only connections still in their handshake (half-open) can be evicted.
// So an attacker at one address holds at most `per_address` slots and evicts only its own
// connections; peers at other addresses share the other `total - per_address` slots. An
// attacker at many addresses can evict others' handshakes, but only by opening `total`
// connections within one handshake's round trips (milliseconds on a LAN), and whatever it
// does a newcomer gets a slot. Age is the order of admission.
//
// Pure bookkeeping, not thread-safe: TcpTransport (tcp_transport.h) calls it under its
// mutex and evicts by failing the victim's connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace herd::net {

struct HandshakeSlotLimits {
  size_t total = 16;
  // Half the slots: peers elsewhere keep the other half, and loopback clusters (every node
  // at 127.0.0.1) keep room for a coordinator and several ring links dialled at once.
  size_t per_address = 8;
};

// The part of "host:port" or "[v6]:port" (TcpConnection::address()) that slots are
// counted by: the host for IPv4 and names, the first four groups ("2001:db8:1:2::/64") for
// IPv6. A text it cannot parse counts as itself (never an error: the peer chose it).
std::string slot_address(std::string_view address);

class HandshakeSlots {
 public:
  using Id = uint64_t;
  struct Admission {
    Id id;                      // the newcomer's slot
    std::optional<Id> evicted;  // the handshake to end to make room, if any
  };

  // REQUIRES: limits.total >= 1, 1 <= limits.per_address <= limits.total.
  explicit HandshakeSlots(HandshakeSlotLimits limits);

  // Always admits `address` (as slot_address gives it), evicting as described above; the
  // evicted slot is free from this call on.
  Admission admit(const std::string& address);
  // The peer's first HELLO arrived whole: it is evicted only after every slot (of its
  // address, or of all) whose peer has sent less. An id no longer held is ignored.
  void heard_hello(Id id);
  // The handshake ended (completed, failed or evicted); an id no longer held is ignored.
  void release(Id id);

  bool holds(Id id) const;  // false once released or evicted
  size_t size() const { return slots_.size(); }
  size_t count(const std::string& address) const;

 private:
  HandshakeSlotLimits limits_;
  Id next_ = 1;
  struct Slot {
    std::string address;
    bool heard_hello = false;
  };
  // The oldest slot among those of `address` (all when null), preferring one not heard.
  Id victim(const std::string* address) const;

  std::map<Id, Slot> slots_;  // by age: the first is the oldest
  std::map<std::string, size_t> per_address_;
};

}  // namespace herd::net
