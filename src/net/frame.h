// The frame: every message between herd nodes travels as one fixed 28-byte header and a
// payload of `length` bytes (see docs/protocol.md for the byte diagram and each payload).
//
//   offset  size  field
//        0     4  magic    "HERD" (bytes 48 45 52 44)
//        4     2  version  kProtocolVersion
//        6     2  type     MessageType
//        8     4  flags    reserved, must be 0
//       12     8  id       request id; a reply carries the id of its request
//       20     8  length   payload bytes that follow
//
// Little-endian throughout. decode_header() checks magic, version, type, flags and the
// per-type length limit before the receiver allocates anything, so a hostile header can
// make us allocate at most FrameLimits::max_payload(type) bytes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "net/payload_pool.h"

namespace herd::net {

using ConstBytes = std::span<const uint8_t>;

inline constexpr uint32_t kFrameMagic = 0x44524548;  // "HERD" read as a little-endian u32
// 2: the handshake exchanges ephemeral X25519 keys and signs with node identities, and
// frames after it are encrypted (frame_cipher.h). 3: COLLECTIVE carries its values' dtype
// (f32, f16 or q8_0). Peers of other versions are refused.
inline constexpr uint16_t kProtocolVersion = 3;

enum class MessageType : uint16_t {
  HELLO = 1,
  PROFILE = 2,
  LOAD = 3,
  WEIGHTS = 4,
  READY = 5,
  FORWARD = 6,
  RESULT = 7,
  COLLECTIVE = 8,
  PING = 9,
  PONG = 10,
  ERROR = 11,
  BYE = 12,
  WANT = 13,
  RING = 14,
  PROBE = 15,
  PEER_PROBE = 16,
  PEER_LINK = 17,
  STATE = 18,
};
inline constexpr uint16_t kMaxMessageType = 18;

// "HELLO", ...; "UNKNOWN" for a value outside the enum.
std::string_view message_type_name(MessageType type);

// Byte offsets of the header fields; the sizes add up to the header size.
inline constexpr size_t kFrameOffsetMagic = 0;
inline constexpr size_t kFrameOffsetVersion = 4;
inline constexpr size_t kFrameOffsetType = 6;
inline constexpr size_t kFrameOffsetFlags = 8;
inline constexpr size_t kFrameOffsetId = 12;
inline constexpr size_t kFrameOffsetLength = 20;
inline constexpr size_t kFrameHeaderSize = 28;
static_assert(kFrameOffsetVersion == kFrameOffsetMagic + sizeof(uint32_t));
static_assert(kFrameOffsetType == kFrameOffsetVersion + sizeof(uint16_t));
static_assert(kFrameOffsetFlags == kFrameOffsetType + sizeof(uint16_t));
static_assert(kFrameOffsetId == kFrameOffsetFlags + sizeof(uint32_t));
static_assert(kFrameOffsetLength == kFrameOffsetId + sizeof(uint64_t));
static_assert(kFrameHeaderSize == kFrameOffsetLength + sizeof(uint64_t));

// The header fields a sender chooses; magic and version are implied.
struct FrameHeader {
  MessageType type = MessageType::PING;
  uint32_t flags = 0;
  uint64_t id = 0;
  uint64_t length = 0;  // payload bytes
};

// Largest WEIGHTS chunk a sender may put in one frame (bytes of tensor data), and the size
// weight shipping uses. Raw frames of 1 to 64 MiB all ran at 2.7-3.4 GB/s on loopback
// (bench/net_bench.cpp); shipping into a file prefers 4 MiB: a chunk is still in the 32 MiB L3
// when the node verifies it and copies it into the cache file, and the chunks in flight
// reuse a few pooled buffers; bench/ship_bench.cpp on a loaded 2-core VM: 16 MiB 0.53 s,
// 4 MiB 0.43-0.49 s, 2 and 1 MiB no better (end to end; see docs/performance.md).
inline constexpr uint64_t kMaxWeightsChunkBytes = uint64_t{64} << 20;
inline constexpr uint64_t kWeightsChunkBytes = uint64_t{4} << 20;

// Per-type payload limits. Control messages are small; WEIGHTS is one chunk plus its
// fields; FORWARD/RESULT/COLLECTIVE carry activations or logits and are bounded by a
// configurable limit (a batch of 512 tokens' logits over a 150k vocabulary in F32 is
// ~300 MiB, hence the default).
struct FrameLimits {
  uint64_t control = uint64_t{64} << 10;  // HELLO PROFILE READY PING PONG ERROR BYE
  uint64_t load = uint64_t{16} << 20;     // LOAD: the plan part as JSON
  uint64_t weights = kMaxWeightsChunkBytes + (uint64_t{64} << 10);
  uint64_t activations = uint64_t{512} << 20;  // FORWARD RESULT COLLECTIVE
  uint64_t probe = (uint64_t{16} << 20) + 8;   // PROBE: at most kMaxProbeBytes of data
  // Before the HELLO handshake completes only HELLO, ERROR and BYE are accepted, so an
  // unauthenticated peer cannot make us allocate more than `control` bytes.
  bool handshake_only = false;

  uint64_t max_payload(MessageType type) const;
  static FrameLimits handshake() {
    FrameLimits limits;
    limits.handshake_only = true;
    return limits;
  }
};

// One received frame. The payload is uninitialised memory filled by the transport (no
// zeroing pass over large WEIGHTS chunks), possibly recycled from the connection's pool.
struct Frame {
  FrameHeader header;
  PayloadStorage storage;  // [header.length - placed_bytes]
  // The last bytes of the payload that the transport wrote into a file instead of
  // `storage`: a WEIGHTS chunk's data, with a WeightsSink installed (transport.h). 0 for
  // every other frame. payload() is then the chunk's fields alone.
  uint64_t placed_bytes = 0;
  ConstBytes payload() const {
    return {storage.get(), static_cast<size_t>(header.length - placed_bytes)};
  }
};

std::array<uint8_t, kFrameHeaderSize> encode_header(const FrameHeader& header);

// Parses and validates a header. REQUIRES: bytes.size() >= kFrameHeaderSize (only the first
// kFrameHeaderSize bytes are read). Throws herd::Error("[net] frame: ...") naming the bad
// field: magic, version, unknown type, non-zero flags, a type not allowed before the
// handshake, or a length over the type's limit.
FrameHeader decode_header(ConstBytes bytes, const FrameLimits& limits);

}  // namespace herd::net
