// Frame encryption after the handshake: XChaCha20-Poly1305 (IETF) from libsodium, one key
// per direction of a connection (derived in the handshake, auth.h), one frame one AEAD
// message. The 28-byte frame header travels in the clear, so the receiver can check the
// type and length before it allocates, and is authenticated as additional data; the
// payload is encrypted and followed by a 16-byte tag:
//
//   header[28] (length = plaintext payload bytes) | ciphertext[length] | tag[16]
//
// The nonce is the frame's number in its direction (u64 little-endian, then 16 zero bytes),
// counted by both ends and never sent: a replayed, dropped, reordered or forged frame is
// opened with another number than it was sealed with and fails authentication, and the
// connection ends. Keys are fresh per connection, so numbers never repeat under one key.
// A 24-byte nonce is more than a counter needs; XChaCha20 costs the same as the 12-byte
// IETF ChaCha20 per byte and leaves no nonce-size trap for later uses of the key.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "net/frame.h"

namespace herd::net {

inline constexpr size_t kFrameTagBytes = 16;
inline constexpr size_t kSessionKeyBytes = 32;
using SessionKey = std::array<uint8_t, kSessionKeyBytes>;

// The two keys of one end of a connection (the other end has them swapped).
struct SessionKeys {
  SessionKey send{};
  SessionKey receive{};
};

// One direction's cipher and frame counter. Not thread-safe: the sender holds its send
// lock, the receiver is one thread.
class FrameCipher {
 public:
  explicit FrameCipher(const SessionKey& key);
  ~FrameCipher();
  FrameCipher(const FrameCipher&) = delete;
  FrameCipher& operator=(const FrameCipher&) = delete;

  // Encrypts `data` in place as the next frame, authenticating `header`; writes the tag.
  void seal(ConstBytes header, std::span<uint8_t> data, uint8_t tag[kFrameTagBytes]);
  // Decrypts `data` in place if `tag` authenticates it and `header` as the next frame;
  // false otherwise (the data is then garbage and the connection must end).
  bool open(ConstBytes header, std::span<uint8_t> data, const uint8_t tag[kFrameTagBytes]);

  // Frames sealed or opened so far: the next frame's number.
  uint64_t frames() const { return counter_; }

 private:
  std::array<uint8_t, 24> nonce() const;
  SessionKey key_;
  uint64_t counter_ = 0;
};

}  // namespace herd::net
