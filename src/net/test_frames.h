// Test helpers: whole encoded frames of every message type, valid and small, for round
// trips, truncation and mutation tests.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "net/messages.h"

namespace herd::net::testing {

// The payload as one contiguous buffer (head, tail, trailer).
inline std::vector<uint8_t> joined(const Payload& payload) {
  std::vector<uint8_t> out(payload.head);
  out.insert(out.end(), payload.tail.begin(), payload.tail.end());
  out.insert(out.end(), payload.trailer.begin(), payload.trailer.end());
  return out;
}

// Header plus payload, as a receiver reads them from the wire.
template <typename M>
std::vector<uint8_t> frame_bytes(const M& message, uint64_t id = 7) {
  std::vector<uint8_t> payload = joined(encode(message));
  auto head = encode_header(FrameHeader{M::kType, 0, id, payload.size()});
  // Sized once and filled with memcpy (growing a vector from the 28-byte array trips a
  // false -Warray-bounds in g++ 12).
  std::vector<uint8_t> out(head.size() + payload.size());
  std::memcpy(out.data(), head.data(), head.size());
  if (!payload.empty()) std::memcpy(out.data() + head.size(), payload.data(), payload.size());
  return out;
}

// Data that sample messages view; lives as long as the program.
inline const std::vector<uint8_t>& sample_bytes() {
  static const std::vector<uint8_t> bytes = [] {
    std::vector<uint8_t> b(96);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);
    return b;
  }();
  return bytes;
}

inline std::vector<std::vector<uint8_t>> sample_frames() {
  const std::vector<uint8_t>& data = sample_bytes();
  Hello hello{kProtocolVersion, AuthMode::HMAC_SHA256, "node-a", {}, Proof{}};
  hello.nonce[0] = 1;
  (*hello.proof)[31] = 9;
  Profile profile{"node-b", 8, 64ull << 30, 60ull << 30, 80.5, 512.25, R"({"isa":"avx2"})"};
  Load load{R"({"layers":[0,12]})", ContentHash{1, 2}, "/models/x.gguf"};
  Weights weights{"blk.0.attn_q.weight", 32, 256, 0, ConstBytes(data.data(), 64)};
  weights.chunk_hash = chunk_hash(weights.data);
  Forward forward;
  forward.batch.add(11, 0, 5, true);
  forward.batch.add(12, 1, 9, false);
  forward.activations = Activations{WireDType::F32, 2, 4, ConstBytes(data.data(), 32)};
  Result result{ResultKind::LOGITS, Activations{WireDType::F16, 3, 8, ConstBytes(data.data(), 48)}};
  Collective collective{5, 2, 100, ConstBytes(data.data(), 40)};
  Collective q8_collective{6, 1, 64, ConstBytes(data.data(), 68), WireDType::Q8_0};
  // Stage to stage: a FORWARD and a RESULT with the stage times of the stages before.
  Forward chained = forward;
  chained.upstream_ns = {1500, 2600};
  Result chained_result = result;
  chained_result.compute_ns = 700;
  chained_result.upstream_ns = {1500, 2600, 3700};
  return {frame_bytes(hello),
          frame_bytes(profile),
          frame_bytes(load),
          frame_bytes(weights),
          frame_bytes(Ready{}),
          frame_bytes(forward),
          frame_bytes(result),
          frame_bytes(collective),
          frame_bytes(Ping{123}),
          frame_bytes(Pong{456}),
          frame_bytes(ErrorReply{ErrorCode::LOAD_FAILED, "disk full"}),
          frame_bytes(Bye{}),
          frame_bytes(Want{}),
          frame_bytes(Ring{0x1234, 2}),
          frame_bytes(Probe{4096, ConstBytes(data.data(), 24)}),
          frame_bytes(chained),
          frame_bytes(chained_result),
          frame_bytes(q8_collective),
          frame_bytes(PeerProbe{300, "10.0.0.7:7070"}),
          frame_bytes(PeerLink{true, 0.0008, 1.2e8, 1.1e8, ""}),
          frame_bytes(PeerLink{false, 0, 0, 0, "connection refused"}),
          frame_bytes(State{{{StateOpKind::HOLD, 1, 0}, {StateOpKind::RESTORE, 0, 48}}})};
}

}  // namespace herd::net::testing
