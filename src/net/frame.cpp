#include "net/frame.h"

#include <cstdio>
#include <string>

#include "net/wire_io.h"
#include "util/error.h"

namespace herd::net {

std::string_view message_type_name(MessageType type) {
  switch (type) {
    case MessageType::HELLO:
      return "HELLO";
    case MessageType::PROFILE:
      return "PROFILE";
    case MessageType::LOAD:
      return "LOAD";
    case MessageType::WEIGHTS:
      return "WEIGHTS";
    case MessageType::READY:
      return "READY";
    case MessageType::FORWARD:
      return "FORWARD";
    case MessageType::RESULT:
      return "RESULT";
    case MessageType::COLLECTIVE:
      return "COLLECTIVE";
    case MessageType::PING:
      return "PING";
    case MessageType::PONG:
      return "PONG";
    case MessageType::ERROR:
      return "ERROR";
    case MessageType::BYE:
      return "BYE";
    case MessageType::WANT:
      return "WANT";
    case MessageType::RING:
      return "RING";
    case MessageType::PROBE:
      return "PROBE";
    case MessageType::PEER_PROBE:
      return "PEER_PROBE";
    case MessageType::PEER_LINK:
      return "PEER_LINK";
    case MessageType::STATE:
      return "STATE";
  }
  return "UNKNOWN";
}

uint64_t FrameLimits::max_payload(MessageType type) const {
  switch (type) {
    case MessageType::LOAD:
      return load;
    case MessageType::WEIGHTS:
      return weights;
    case MessageType::FORWARD:
    case MessageType::RESULT:
    case MessageType::COLLECTIVE:
      return activations;
    case MessageType::PROBE:
      return probe;
    default:
      return control;
  }
}

std::array<uint8_t, kFrameHeaderSize> encode_header(const FrameHeader& header) {
  std::array<uint8_t, kFrameHeaderSize> out{};
  store_le<uint32_t>(out.data() + kFrameOffsetMagic, kFrameMagic);
  store_le<uint16_t>(out.data() + kFrameOffsetVersion, kProtocolVersion);
  store_le<uint16_t>(out.data() + kFrameOffsetType, static_cast<uint16_t>(header.type));
  store_le<uint32_t>(out.data() + kFrameOffsetFlags, header.flags);
  store_le<uint64_t>(out.data() + kFrameOffsetId, header.id);
  store_le<uint64_t>(out.data() + kFrameOffsetLength, header.length);
  return out;
}

namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

FrameHeader decode_header(ConstBytes bytes, const FrameLimits& limits) {
  if (bytes.size() < kFrameHeaderSize) {
    throw Error("net", "frame: header truncated (" + std::to_string(bytes.size()) + " of " +
                           std::to_string(kFrameHeaderSize) + " bytes)");
  }
  const uint8_t* p = bytes.data();
  uint32_t magic = load_le<uint32_t>(p + kFrameOffsetMagic);
  if (magic != kFrameMagic) {
    throw Error("net",
                "frame: bad magic " + hex32(magic) + " (expected \"HERD\"); not a herd peer?");
  }
  uint16_t version = load_le<uint16_t>(p + kFrameOffsetVersion);
  if (version != kProtocolVersion) {
    throw Error("net", "frame: protocol version " + std::to_string(version) +
                           " is not supported (this build speaks version " +
                           std::to_string(kProtocolVersion) + ")");
  }
  uint16_t type = load_le<uint16_t>(p + kFrameOffsetType);
  if (type == 0 || type > kMaxMessageType) {
    throw Error("net", "frame: unknown message type " + std::to_string(type));
  }
  FrameHeader header;
  header.type = static_cast<MessageType>(type);
  header.flags = load_le<uint32_t>(p + kFrameOffsetFlags);
  header.id = load_le<uint64_t>(p + kFrameOffsetId);
  header.length = load_le<uint64_t>(p + kFrameOffsetLength);
  std::string_view name = message_type_name(header.type);
  if (header.flags != 0) {
    throw Error("net", std::string("frame: ") + std::string(name) + " has unknown flags " +
                           hex32(header.flags) + " (none are defined)");
  }
  if (limits.handshake_only && header.type != MessageType::HELLO &&
      header.type != MessageType::ERROR && header.type != MessageType::BYE) {
    throw Error("net", std::string("frame: ") + std::string(name) +
                           " before the HELLO handshake completed");
  }
  uint64_t limit = limits.max_payload(header.type);
  if (header.length > limit) {
    throw Error("net", std::string("frame: ") + std::string(name) + " payload of " +
                           std::to_string(header.length) + " bytes exceeds the limit of " +
                           std::to_string(limit) + " bytes");
  }
  return header;
}

}  // namespace herd::net
