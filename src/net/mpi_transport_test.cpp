// Runs as several ranks under mpirun (tests register it with HERD_MPIEXEC_FLAGS): every rank
// runs every test, in the same order, and each test is written for all of them (SPMD). One
// MpiTransport serves the whole process, as MPI can be initialised once.
#include "net/mpi_transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "net/ring.h"
#include "util/error.h"

namespace herd::net {
namespace {

constexpr Millis kTimeout{30000};  // generous: three ranks share two loaded cores

MpiTransport* g_transport = nullptr;

class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { g_transport = new MpiTransport(); }
  void TearDown() override {
    delete g_transport;  // waits for every rank, then finalises MPI
    g_transport = nullptr;
  }
};

MpiTransport& transport() {
  return *g_transport;
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

std::string text_of(const Frame& frame) {
  const ConstBytes p = frame.payload();
  return {p.begin(), p.end()};
}

TEST(MpiTransport, KnowsItsRankAndSize) {
  EXPECT_GE(transport().size(), 2) << "run under mpirun -n 2 or more";
  EXPECT_GE(transport().rank(), 0);
  EXPECT_LT(transport().rank(), transport().size());
  EXPECT_EQ(transport().name(), "mpi");
}

TEST(MpiTransport, RefusesItselfAndRanksBeyondTheJob) {
  const int self = transport().rank();
  EXPECT_THROW(transport().connect(MpiTransport::address_of(self), kTimeout), Error);
  EXPECT_THROW(transport().connect(MpiTransport::address_of(transport().size()), kTimeout), Error);
  EXPECT_THROW(transport().connect("127.0.0.1:7070", kTimeout), Error);
}

// Rank 0 opens a channel to every other rank (as a coordinator does); each answers on it.
TEST(MpiTransport, CoordinatorAndNodesExchangeFrames) {
  const int self = transport().rank();
  if (self == 0) {
    std::vector<std::shared_ptr<Connection>> nodes;
    for (int r = 1; r < transport().size(); ++r) {
      nodes.push_back(transport().connect(MpiTransport::address_of(r), kTimeout));
      const std::vector<uint8_t> hello = bytes_of("to " + std::to_string(r));
      nodes.back()->send_frame(MessageType::LOAD, 7, hello);
    }
    for (int r = 1; r < transport().size(); ++r) {
      Connection& c = *nodes[static_cast<size_t>(r - 1)];
      EXPECT_EQ(c.peer_name(), "rank:" + std::to_string(r));
      Frame frame = c.recv_frame(kTimeout);
      EXPECT_EQ(frame.header.type, MessageType::READY);
      EXPECT_EQ(frame.header.id, 7u);
      EXPECT_EQ(text_of(frame), "from " + std::to_string(r));
      EXPECT_EQ(c.stats().frames_received, 2u);  // the PING counts, as on TCP
      c.close();
    }
  } else {
    std::shared_ptr<Connection> c = transport().accept(kTimeout);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->peer_name(), "rank:0");
    Frame frame = c->recv_frame(kTimeout);
    EXPECT_EQ(frame.header.type, MessageType::LOAD);
    EXPECT_EQ(text_of(frame), "to " + std::to_string(self));
    // PINGs are consumed by the transport, never returned.
    c->send_frame(MessageType::PING, 0, std::vector<uint8_t>(8, 0));
    c->send_frame(MessageType::READY, frame.header.id, bytes_of("from " + std::to_string(self)));
    // The coordinator's BYE ends the channel.
    EXPECT_THAT([&] { c->recv_frame(kTimeout); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("said goodbye")));
    EXPECT_FALSE(c->is_open());
  }
}

// A frame gathered from parts, larger than any eager limit (MPI's rendezvous path), arrives
// whole and in order after a small one on the same channel.
TEST(MpiTransport, LargeFramesArriveWholeAndInOrder) {
  const int self = transport().rank();
  const size_t n = (size_t{9} << 20) + 3;
  if (self == 0) {
    auto c = transport().connect(MpiTransport::address_of(1), kTimeout);
    std::vector<uint8_t> head(5, 0xAB), tail(n - 5);
    for (size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<uint8_t>(i * 7);
    c->send_frame(MessageType::FORWARD, 1, bytes_of("small"));
    const ConstBytes parts[2] = {head, tail};
    c->send_frame_parts(FrameHeader{MessageType::WEIGHTS, 0, 2, 0}, parts);
    Frame ack = c->recv_frame(kTimeout);
    EXPECT_EQ(text_of(ack), "ok");
    c->close();
  } else if (self == 1) {
    auto c = transport().accept(kTimeout);
    ASSERT_TRUE(c);
    Frame small = c->recv_frame(kTimeout);
    EXPECT_EQ(small.header.id, 1u);
    Frame big = c->recv_frame(kTimeout);
    EXPECT_EQ(big.header.type, MessageType::WEIGHTS);
    ASSERT_EQ(big.payload().size(), n);
    bool same = true;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t want = i < 5 ? 0xAB : static_cast<uint8_t>((i - 5) * 7);
      same = same && big.payload()[i] == want;
    }
    EXPECT_TRUE(same);
    EXPECT_EQ(c->stats().bytes_received, 2 * kFrameHeaderSize + 5 + n);
    c->send_frame(MessageType::READY, 0, bytes_of("ok"));
    EXPECT_THROW(c->recv_frame(kTimeout), Error);  // BYE
  }
}

// herd's ring all-reduce over MPI channels (what a tensor-parallel stage runs): rank r opens
// the link to r + 1 and accepts the one from r - 1. Small vectors (gathered whole) and large
// ones (reduce-scatter + all-gather) give the exact sums on every rank.
TEST(MpiTransport, RingAllReduceOverChannels) {
  const int p = transport().size();
  const int r = transport().rank();
  std::shared_ptr<Connection> next =
      transport().connect(MpiTransport::address_of((r + 1) % p), kTimeout);
  std::shared_ptr<Connection> prev = transport().accept(kTimeout);
  ASSERT_TRUE(prev);
  EXPECT_EQ(prev->peer_name(), MpiTransport::address_of((r + p - 1) % p));
  RingCollectives ring(r, p, next, prev);
  for (size_t n : {size_t{1}, size_t{1000}, size_t{300001}}) {
    std::vector<float> data(n);
    for (size_t j = 0; j < n; ++j) data[j] = static_cast<float>(r * 1000) + (j % 4096) * 0.5f;
    ring.all_reduce_sum(data.data(), n);
    bool exact = true;
    for (size_t j = 0; j < n; ++j) {
      float expected = 0;
      for (int q = 0; q < p; ++q) expected += static_cast<float>(q * 1000) + (j % 4096) * 0.5f;
      exact = exact && data[j] == expected;
    }
    EXPECT_TRUE(exact) << "n=" << n;
  }
  next->close();
  prev->close();
}

// Channels nobody accepted are closed when the transport shuts down (after the last test:
// the environment's TearDown), without hanging it. Rank 0 opens channel `told` to every
// rank, then `unclaimed`, and says "sent" on `told`: each rank accepts `told` (the first in
// its queue) and, once "sent" arrives, has `unclaimed` waiting in its queue (messages from
// one rank arrive in order), which it never takes. Rank 0 keeps both open.
std::vector<std::shared_ptr<Connection>> g_kept;
TEST(MpiTransport, UnclaimedChannelsDoNotHoldUpTheEnd) {
  if (transport().rank() == 0) {
    for (int r = 1; r < transport().size(); ++r) {
      auto told = transport().connect(MpiTransport::address_of(r), kTimeout);
      auto unclaimed = transport().connect(MpiTransport::address_of(r), kTimeout);
      unclaimed->send_frame(MessageType::LOAD, 1, bytes_of("never read"));
      told->send_frame(MessageType::READY, 2, bytes_of("sent"));
      g_kept.push_back(told);
      g_kept.push_back(unclaimed);
    }
  } else {
    std::shared_ptr<Connection> told = transport().accept(kTimeout);
    ASSERT_TRUE(told);
    EXPECT_EQ(text_of(told->recv_frame(kTimeout)), "sent");
    g_kept.push_back(told);
  }
}

}  // namespace
}  // namespace herd::net

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new herd::net::MpiEnvironment);
  return RUN_ALL_TESTS();
}
