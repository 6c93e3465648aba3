#include "net/heartbeat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "net/loopback.h"
#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

TEST(HeartbeatTest, LivePeerStaysConnectedAndFrozenPeerIsReportedByName) {
  LoopbackPair pair = make_loopback_pair("coordinator", "node-7");
  pair.a->finish_handshake("node-7", FrameLimits{});
  pair.b->finish_handshake("coordinator", FrameLimits{});
  std::mutex mutex;
  std::string reported;
  Heartbeat heartbeat(HeartbeatOptions{Millis(50), Millis(500)},
                      [&](const std::string& peer, const std::string& reason) {
                        std::lock_guard lock(mutex);
                        reported = peer + ": " + reason;
                      });
  heartbeat.watch(pair.a);
  std::this_thread::sleep_for(Millis(1200));  // PINGs answered: longer than the timeout
  EXPECT_TRUE(pair.a->is_open());
  EXPECT_GT(pair.a->stats().frames_sent, 5u);

  pair.b->freeze();  // the node stops answering, its socket still open
  auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([&] { pair.a->recv_frame(Millis(10000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("peer 'node-7': silent for")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, Millis(2500));
  std::lock_guard lock(mutex);
  EXPECT_THAT(reported, HasSubstr("node-7: silent for"));
}

// A stage link is dialled before its node loads and watched after: the silence before
// watch() (nobody pinged) must not fail it at the first tick.
TEST(HeartbeatTest, SilenceBeforeWatchingDoesNotCount) {
  LoopbackPair pair = make_loopback_pair("e1", "e2");
  pair.a->finish_handshake("e2", FrameLimits{});
  pair.b->finish_handshake("e1", FrameLimits{});
  std::this_thread::sleep_for(Millis(400));  // a load: no frames either way
  ASSERT_GE(pair.a->silent_for(), Millis(300));
  Heartbeat heartbeat(HeartbeatOptions{Millis(50), Millis(300)});
  heartbeat.watch(pair.a);
  std::this_thread::sleep_for(Millis(600));  // PINGs answered from the first tick on
  EXPECT_TRUE(pair.a->is_open());
}

TEST(HeartbeatTest, ForgetsClosedAndDestroyedConnections) {
  Heartbeat heartbeat(HeartbeatOptions{Millis(10), Millis(100)});
  {
    LoopbackPair pair = make_loopback_pair("x", "y");
    heartbeat.watch(pair.a);
    heartbeat.watch(pair.b);
    EXPECT_EQ(heartbeat.watched(), 2u);
    pair.b->close();
  }
  std::this_thread::sleep_for(Millis(100));
  EXPECT_EQ(heartbeat.watched(), 0u);
}

}  // namespace
}  // namespace herd::net
