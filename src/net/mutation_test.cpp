// Random mutations of valid frames never crash the decoders: every input either decodes
// or fails with herd::Error (the libFuzzer target fuzz/net_frame_fuzz.cpp explores further).
#include <gtest/gtest.h>

#include <random>

#include "net/messages.h"
#include "net/test_frames.h"
#include "util/error.h"

namespace herd::net {
namespace {

std::vector<uint8_t> mutate(std::vector<uint8_t> bytes, std::mt19937_64& rng) {
  int n_edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < n_edits; ++e) {
    size_t size = bytes.size();
    switch (rng() % 6) {
      case 0:  // flip a bit
        if (size) bytes[rng() % size] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte to an interesting value
        if (size) bytes[rng() % size] = std::array<uint8_t, 5>{0, 1, 0x7f, 0x80, 0xff}[rng() % 5];
        break;
      case 2:  // truncate
        if (size) bytes.resize(rng() % size);
        break;
      case 3:  // insert a random byte
        bytes.insert(bytes.begin() + static_cast<long>(size ? rng() % size : 0),
                     static_cast<uint8_t>(rng()));
        break;
      case 4:  // erase a byte
        if (size) bytes.erase(bytes.begin() + static_cast<long>(rng() % size));
        break;
      case 5:  // overwrite 4 bytes with a large little-endian count
        if (size >= 4) {
          size_t at = rng() % (size - 3);
          uint32_t v = std::array<uint32_t, 4>{0xffffffff, 0x80000000, 0x10000, 1000}[rng() % 4];
          std::memcpy(bytes.data() + at, &v, 4);
        }
        break;
    }
  }
  return bytes;
}

TEST(MutationTest, MutatedFramesDecodeOrFailWithHerdError) {
  std::mt19937_64 rng(1234);
  const auto frames = testing::sample_frames();
  FrameLimits limits;
  int decoded = 0;
  int rejected = 0;
  for (int i = 0; i < 40000; ++i) {
    std::vector<uint8_t> bytes = mutate(frames[i % frames.size()], rng);
    // Keep the declared length consistent half of the time, so payload decoders are reached.
    if (i % 2 == 0 && bytes.size() >= kFrameHeaderSize) {
      uint64_t length = bytes.size() - kFrameHeaderSize;
      std::memcpy(bytes.data() + kFrameOffsetLength, &length, 8);
    }
    try {
      decode_frame(bytes, limits);
      ++decoded;
    } catch (const Error&) {
      ++rejected;
    }
    // The payload decoders alone, on the bytes after the header.
    if (bytes.size() > kFrameHeaderSize) {
      auto type = static_cast<MessageType>(1 + rng() % kMaxMessageType);
      try {
        decode_message(type, ConstBytes(bytes).subspan(kFrameHeaderSize));
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(decoded, 100);
  EXPECT_GT(rejected, 10000);
}

}  // namespace
}  // namespace herd::net
