#include "net/delayed_connection.h"

#include <gtest/gtest.h>

#include "net/loopback.h"

namespace herd::net {
namespace {

using Clock = std::chrono::steady_clock;

TEST(DelayedConnectionTest, FramesAreLateByTheDelayAndHeartbeatsAreNot) {
  LoopbackPair pair = make_loopback_pair("a", "b");
  pair.a->finish_handshake("b", FrameLimits{});
  pair.b->finish_handshake("a", FrameLimits{});
  const std::shared_ptr<Connection> a = delayed(pair.a, std::chrono::milliseconds(30));
  EXPECT_NE(a.get(), pair.a.get());
  EXPECT_EQ(delayed(pair.b, std::chrono::microseconds(0)).get(), pair.b.get());

  const auto start = Clock::now();
  a->send_frame(MessageType::READY, 3, {});
  const Frame frame = pair.b->recv_frame(Millis(5000));
  EXPECT_EQ(frame.header.id, 3u);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(30));

  // A heartbeat's try_send goes at once (a delay no more than scheduling).
  const auto ping = Clock::now();
  EXPECT_TRUE(a->try_send_frame(FrameHeader{MessageType::BYE, 0, 4, 0}, {}));
  EXPECT_LT(Clock::now() - ping, std::chrono::milliseconds(30));
  EXPECT_EQ(a->peer_name(), pair.a->peer_name());
}

}  // namespace
}  // namespace herd::net
