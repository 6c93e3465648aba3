#include "net/frame_cipher.h"

#include <gtest/gtest.h>

#include <vector>

namespace herd::net {
namespace {

SessionKey key_of(uint8_t fill) {
  SessionKey key;
  key.fill(fill);
  return key;
}

struct Sealed {
  std::array<uint8_t, kFrameHeaderSize> header;
  std::vector<uint8_t> data;
  std::array<uint8_t, kFrameTagBytes> tag;
};

Sealed seal(FrameCipher& cipher, MessageType type, std::vector<uint8_t> data) {
  Sealed s{encode_header(FrameHeader{type, 0, 7, data.size()}), std::move(data), {}};
  cipher.seal(s.header, s.data, s.tag.data());
  return s;
}

bool open(FrameCipher& cipher, Sealed s) {
  return cipher.open(s.header, s.data, s.tag.data());
}

TEST(FrameCipherTest, OpensWhatItSealedInOrder) {
  FrameCipher sender(key_of(1));
  FrameCipher receiver(key_of(1));
  std::vector<uint8_t> text = {'h', 'e', 'r', 'd'};
  Sealed a = seal(sender, MessageType::FORWARD, text);
  Sealed b = seal(sender, MessageType::FORWARD, text);
  EXPECT_NE(a.data, text);
  EXPECT_NE(a.data, b.data);  // another nonce: same text, other bytes
  Sealed empty = seal(sender, MessageType::READY, {});
  ASSERT_TRUE(receiver.open(a.header, a.data, a.tag.data()));
  EXPECT_EQ(a.data, text);
  EXPECT_TRUE(open(receiver, b));
  EXPECT_TRUE(open(receiver, empty));
  EXPECT_EQ(receiver.frames(), 3u);
}

TEST(FrameCipherTest, RefusesTamperedReplayedReorderedAndForeignFrames) {
  std::vector<uint8_t> text(1000, 0x5a);
  {
    FrameCipher sender(key_of(1)), receiver(key_of(1));
    Sealed s = seal(sender, MessageType::FORWARD, text);
    for (size_t at : {size_t{0}, size_t{999}}) {
      Sealed t = s;
      t.data[at] ^= 0x01;
      EXPECT_FALSE(open(receiver, t)) << "data byte " << at;
    }
    Sealed t = s;
    t.tag[3] ^= 0x80;
    EXPECT_FALSE(open(receiver, t)) << "tag";
    t = s;
    t.header[kFrameOffsetId] ^= 1;  // the header is authenticated too
    EXPECT_FALSE(open(receiver, t)) << "header";
    EXPECT_TRUE(open(receiver, s));
    EXPECT_FALSE(open(receiver, s)) << "replay";
  }
  {
    FrameCipher sender(key_of(1)), receiver(key_of(1));
    Sealed first = seal(sender, MessageType::FORWARD, text);
    Sealed second = seal(sender, MessageType::FORWARD, text);
    EXPECT_FALSE(open(receiver, second)) << "reordered";
    EXPECT_TRUE(open(receiver, first));
    EXPECT_TRUE(open(receiver, second));
  }
  {
    FrameCipher sender(key_of(1)), receiver(key_of(2));
    EXPECT_FALSE(open(receiver, seal(sender, MessageType::FORWARD, text))) << "other key";
  }
}

}  // namespace
}  // namespace herd::net
