#include "net/frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

// The error text of decode_header(bytes), or "" when it succeeds.
std::string header_error(std::array<uint8_t, kFrameHeaderSize> bytes,
                         const FrameLimits& limits = {}) {
  try {
    decode_header(bytes, limits);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::array<uint8_t, kFrameHeaderSize> header_bytes(MessageType type, uint64_t length) {
  return encode_header(FrameHeader{type, 0, 42, length});
}

TEST(FrameTest, HeaderIsTheDocumentedBytes) {
  auto bytes = encode_header(FrameHeader{MessageType::WEIGHTS, 0, 0x0102030405060708, 0x99});
  const uint8_t expected[kFrameHeaderSize] = {'H',  'E', 'R', 'D',               // magic
                                              3,    0,                           // version
                                              4,    0,                           // type WEIGHTS
                                              0,    0,   0,   0,                 // flags
                                              8,    7,   6,   5,   4, 3, 2, 1,   // id
                                              0x99, 0,   0,   0,   0, 0, 0, 0};  // length
  EXPECT_EQ(0, std::memcmp(bytes.data(), expected, kFrameHeaderSize));
}

TEST(FrameTest, HeaderRoundTrips) {
  for (uint16_t t = 1; t <= kMaxMessageType; ++t) {
    FrameHeader in{static_cast<MessageType>(t), 0, 0xfeedfacecafebeefULL, 17};
    FrameHeader out = decode_header(encode_header(in), FrameLimits{});
    EXPECT_EQ(out.type, in.type);
    EXPECT_EQ(out.id, in.id);
    EXPECT_EQ(out.length, in.length);
    EXPECT_NE(message_type_name(out.type), "UNKNOWN");
  }
}

TEST(FrameTest, RejectsBadMagic) {
  auto bytes = header_bytes(MessageType::PING, 8);
  std::memcpy(bytes.data(), "GET ", 4);
  EXPECT_THAT(header_error(bytes), HasSubstr("[net] frame: bad magic"));
}

TEST(FrameTest, RejectsOtherVersions) {
  auto bytes = header_bytes(MessageType::PING, 8);
  bytes[kFrameOffsetVersion] = 1;
  EXPECT_THAT(header_error(bytes), HasSubstr("protocol version 1 is not supported"));
}

TEST(FrameTest, RejectsUnknownTypes) {
  for (uint16_t type :
       {uint16_t{0}, static_cast<uint16_t>(kMaxMessageType + 1), uint16_t{0xffff}}) {
    auto bytes = header_bytes(MessageType::PING, 8);
    std::memcpy(bytes.data() + kFrameOffsetType, &type, 2);
    EXPECT_THAT(header_error(bytes), HasSubstr("unknown message type " + std::to_string(type)));
  }
}

TEST(FrameTest, RejectsUnknownFlags) {
  auto bytes = encode_header(FrameHeader{MessageType::PING, 0x10, 0, 8});
  EXPECT_THAT(header_error(bytes), HasSubstr("unknown flags 0x00000010"));
}

TEST(FrameTest, RejectsLengthsOverTheTypesLimit) {
  FrameLimits limits;
  limits.activations = 1000;
  EXPECT_EQ(header_error(header_bytes(MessageType::FORWARD, 1000), limits), "");
  EXPECT_THAT(header_error(header_bytes(MessageType::FORWARD, 1001), limits),
              HasSubstr("FORWARD payload of 1001 bytes exceeds the limit of 1000 bytes"));
  EXPECT_THAT(header_error(header_bytes(MessageType::PING, limits.control + 1), limits),
              HasSubstr("PING payload"));
  EXPECT_EQ(header_error(header_bytes(MessageType::WEIGHTS, kMaxWeightsChunkBytes + 100)), "");
  EXPECT_THAT(header_error(header_bytes(MessageType::WEIGHTS, kMaxWeightsChunkBytes * 2)),
              HasSubstr("exceeds the limit"));
  EXPECT_THAT(header_error(header_bytes(MessageType::LOAD, ~uint64_t{0})),
              HasSubstr("exceeds the limit"));
}

TEST(FrameTest, HandshakeLimitsAcceptOnlyHelloErrorBye) {
  FrameLimits limits = FrameLimits::handshake();
  EXPECT_EQ(header_error(header_bytes(MessageType::HELLO, 80), limits), "");
  EXPECT_EQ(header_error(header_bytes(MessageType::ERROR, 80), limits), "");
  EXPECT_EQ(header_error(header_bytes(MessageType::BYE, 0), limits), "");
  EXPECT_THAT(header_error(header_bytes(MessageType::WEIGHTS, 80), limits),
              HasSubstr("WEIGHTS before the HELLO handshake completed"));
  EXPECT_THAT(header_error(header_bytes(MessageType::PING, 8), limits), HasSubstr("before"));
}

TEST(FrameTest, RejectsTruncatedHeaders) {
  auto bytes = header_bytes(MessageType::PING, 8);
  EXPECT_THROW(decode_header(ConstBytes(bytes.data(), 27), FrameLimits{}), Error);
  EXPECT_THROW(decode_header(ConstBytes(), FrameLimits{}), Error);
}

}  // namespace
}  // namespace herd::net
