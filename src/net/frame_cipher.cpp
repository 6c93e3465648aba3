#include "net/frame_cipher.h"

#include <sodium.h>

#include "util/error.h"

namespace herd::net {

static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == kSessionKeyBytes);
static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == kFrameTagBytes);
static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24);

FrameCipher::FrameCipher(const SessionKey& key) : key_(key) {
  if (sodium_init() < 0) throw Error("net", "libsodium failed to initialise");
}

FrameCipher::~FrameCipher() {
  sodium_memzero(key_.data(), key_.size());
}

namespace {
// libsodium declares its message pointers non-null even for empty messages (a frame with
// no payload: READY, BYE): an empty span's data() may be null, so such frames point here.
uint8_t* some_bytes(std::span<uint8_t> data) {
  static uint8_t none[1];
  return data.empty() ? none : data.data();
}
}  // namespace

std::array<uint8_t, 24> FrameCipher::nonce() const {
  std::array<uint8_t, 24> nonce{};
  for (int i = 0; i < 8; ++i) nonce[i] = static_cast<uint8_t>(counter_ >> (8 * i));
  return nonce;
}

void FrameCipher::seal(ConstBytes header, std::span<uint8_t> data, uint8_t tag[kFrameTagBytes]) {
  HERD_CHECK(counter_ != UINT64_MAX);  // 2^64 frames: never, but never reuse a nonce
  const std::array<uint8_t, 24> n = nonce();
  unsigned long long tag_bytes = 0;
  uint8_t* bytes = some_bytes(data);
  crypto_aead_xchacha20poly1305_ietf_encrypt_detached(bytes, tag, &tag_bytes, bytes, data.size(),
                                                      header.data(), header.size(), nullptr,
                                                      n.data(), key_.data());
  ++counter_;
}

bool FrameCipher::open(ConstBytes header, std::span<uint8_t> data,
                       const uint8_t tag[kFrameTagBytes]) {
  const std::array<uint8_t, 24> n = nonce();
  uint8_t* bytes = some_bytes(data);
  if (crypto_aead_xchacha20poly1305_ietf_decrypt_detached(bytes, nullptr, bytes, data.size(), tag,
                                                          header.data(), header.size(), n.data(),
                                                          key_.data()) != 0) {
    return false;
  }
  ++counter_;
  return true;
}

}  // namespace herd::net
