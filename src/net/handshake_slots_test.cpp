#include "net/handshake_slots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio.hpp>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net/tcp_transport.h"
#include "net/test_frames.h"
#include "net/test_log.h"
#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

TEST(HandshakeSlotsTest, CountsByHostAndIpv6Prefix) {
  EXPECT_EQ(slot_address("10.0.0.2:7000"), "10.0.0.2");
  EXPECT_EQ(slot_address("[2001:db8:1:2:aaaa::5]:80"), "2001:db8:1:2::/64");
  EXPECT_EQ(slot_address("[2001:db8:1:2:bbbb::9]:81"), "2001:db8:1:2::/64");
  EXPECT_EQ(slot_address("[::ffff:10.0.0.2]:80"), "10.0.0.2");
  EXPECT_EQ(slot_address("[::1]:80"), "0:0:0:0::/64");
  EXPECT_EQ(slot_address("unknown peer"), "unknown peer");
  EXPECT_EQ(slot_address(""), "");
}

TEST(HandshakeSlotsTest, AnAddressAtItsCapEvictsItsOwnOldest) {
  HandshakeSlots slots({4, 2});
  const auto a1 = slots.admit("a");
  const auto b1 = slots.admit("b");
  const auto a2 = slots.admit("a");
  EXPECT_FALSE(a1.evicted || b1.evicted || a2.evicted);
  const auto a3 = slots.admit("a");  // "a" holds 2: its oldest goes, not b's older one
  ASSERT_TRUE(a3.evicted);
  EXPECT_EQ(*a3.evicted, a1.id);
  EXPECT_FALSE(slots.holds(a1.id));
  EXPECT_TRUE(slots.holds(b1.id));
  EXPECT_EQ(slots.count("a"), 2u);
  EXPECT_EQ(slots.size(), 3u);
  const auto a4 = slots.admit("a");
  ASSERT_TRUE(a4.evicted);
  EXPECT_EQ(*a4.evicted, a2.id);
}

TEST(HandshakeSlotsTest, FullSlotsEvictTheOldestOfAll) {
  HandshakeSlots slots({3, 2});
  const auto a1 = slots.admit("a");
  const auto b1 = slots.admit("b");
  const auto c1 = slots.admit("c");
  const auto d1 = slots.admit("d");
  ASSERT_TRUE(d1.evicted);
  EXPECT_EQ(*d1.evicted, a1.id);
  EXPECT_EQ(slots.size(), 3u);
  EXPECT_EQ(slots.count("a"), 0u);
  slots.release(c1.id);  // c completed: a newcomer now finds a free slot
  EXPECT_FALSE(slots.admit("e").evicted);
  slots.release(c1.id);  // released twice: ignored
  EXPECT_EQ(slots.size(), 3u);
  EXPECT_TRUE(slots.holds(b1.id));
}

// A peer whose whole HELLO arrived goes after every one that has sent less, however old.
TEST(HandshakeSlotsTest, APeerThatSentItsHelloIsEvictedLast) {
  HandshakeSlots slots({4, 3});
  const auto answering = slots.admit("a");
  slots.heard_hello(answering.id);
  const auto stalled = slots.admit("a");
  slots.admit("a");
  const auto next = slots.admit("a");  // "a" at its cap: the stalled one, not the older peer
  ASSERT_TRUE(next.evicted);
  EXPECT_EQ(*next.evicted, stalled.id);
  EXPECT_TRUE(slots.holds(answering.id));
  const auto third = HandshakeSlots::Id{stalled.id + 1};
  EXPECT_FALSE(slots.admit("b").evicted);  // the 4th slot
  const auto b = slots.admit("b");         // all 4 taken: the oldest of those not heard
  ASSERT_TRUE(b.evicted);
  EXPECT_EQ(*b.evicted, third);
  slots.heard_hello(next.id);
  slots.heard_hello(b.id);
  // A flood from c turns over the one slot not heard, never the three answering peers.
  for (int i = 0; i < 10; ++i) slots.admit("c");
  EXPECT_TRUE(slots.holds(answering.id) && slots.holds(next.id) && slots.holds(b.id));
  EXPECT_EQ(slots.count("c"), 1u);
  slots.heard_hello(9999);  // an id no longer held: ignored
  // Only heard ones left at a's cap: the oldest of them goes.
  HandshakeSlots heard({4, 2});
  const auto h1 = heard.admit("a");
  const auto h2 = heard.admit("a");
  heard.heard_hello(h1.id);
  heard.heard_hello(h2.id);
  const auto h3 = heard.admit("a");
  ASSERT_TRUE(h3.evicted);
  EXPECT_EQ(*h3.evicted, h1.id);
}

// Whatever one address does, a peer elsewhere is never evicted and always admitted.
TEST(HandshakeSlotsTest, AFloodFromOneAddressLeavesOthersAlone) {
  HandshakeSlots slots({16, 8});
  std::vector<HandshakeSlots::Id> others;
  for (int i = 0; i < 7; ++i) others.push_back(slots.admit("peer" + std::to_string(i)).id);
  for (int i = 0; i < 1000; ++i) slots.admit("attacker");
  EXPECT_EQ(slots.count("attacker"), 8u);
  for (HandshakeSlots::Id id : others) EXPECT_TRUE(slots.holds(id));
  EXPECT_FALSE(slots.admit("coordinator").evicted.has_value());
}

// ---- the transport, attacked on loopback ----

const char* kHexKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

using Log = TestLog;

TcpTransportOptions keyed(const std::string& name, Millis handshake_timeout, LogFn log = {}) {
  TcpTransportOptions options;
  options.auth =
      AuthConfig{name, std::make_shared<const ClusterKey>(ClusterKey::from_text(kHexKey, "test"))};
  options.handshake_timeout = handshake_timeout;
  options.log = std::move(log);
  return options;
}

// A connection that sends the first half of a valid HELLO frame and stalls.
struct HalfOpen {
  std::unique_ptr<asio::ip::tcp::socket> socket;

  HalfOpen(asio::io_context& io, uint16_t port) {
    socket = std::make_unique<asio::ip::tcp::socket>(io);
    socket->connect({asio::ip::make_address("127.0.0.1"), port});
    Hello hello{kProtocolVersion, AuthMode::HMAC_SHA256, "stalled", {}, std::nullopt};
    const std::vector<uint8_t> frame = testing::frame_bytes(hello, 0);
    asio::write(*socket, asio::buffer(frame.data(), frame.size() / 2));
  }
  // True once the node has closed it (read returns EOF or a reset) within `wait`.
  bool closed_within(Millis wait) {
    socket->non_blocking(true);
    const auto deadline = Clock::now() + wait;
    while (Clock::now() < deadline) {
      uint8_t byte;
      asio::error_code ec;
      socket->read_some(asio::buffer(&byte, 1), ec);
      if (ec && ec != asio::error::would_block) return true;
      std::this_thread::sleep_for(Millis(10));
    }
    return false;
  }
};

TEST(HandshakeSlotsTest, HalfOpenHellosCannotKeepAPeerOut) {
  Log log;
  // A long deadline, so that only eviction can let the client in quickly.
  TcpTransport server(keyed("server", Millis(20000), log.fn()));
  server.listen(ListenOptions{});
  asio::io_context io;
  std::vector<HalfOpen> flood;
  for (int i = 0; i < 24; ++i) flood.emplace_back(io, server.port());
  for (int i = 0; i < 100 && log.count("slots were full") < 16; ++i)
    std::this_thread::sleep_for(Millis(20));
  // Loopback is one address: at 8 of them it evicts its own oldest (16 of 24 so far).
  EXPECT_EQ(log.count("slots were full"), 16u);
  EXPECT_TRUE(flood.front().closed_within(Millis(2000)));
  EXPECT_FALSE(flood.back().closed_within(Millis(50)));

  const auto start = Clock::now();
  TcpTransport client(keyed("coordinator", Millis(5000)));
  auto to_server = client.connect("127.0.0.1:" + std::to_string(server.port()), Millis(5000));
  auto to_client = server.accept(Millis(5000));
  ASSERT_TRUE(to_client);
  EXPECT_THAT(to_client->peer_name(), HasSubstr("coordinator"));
  EXPECT_LT(Clock::now() - start, Millis(3000));  // far inside the flood's 20 s deadline
  send_message(*to_client, 1, Ready{});
  Frame frame;
  recv_message<Ready>(*to_server, Millis(2000), frame);
}

TEST(HandshakeSlotsTest, FullSlotsEvictTheOldestHalfOpenConnection) {
  Log log;
  auto options = keyed("server", Millis(20000), log.fn());
  options.slots = {4, 4};
  TcpTransport server(options);
  server.listen(ListenOptions{});
  asio::io_context io;
  std::vector<HalfOpen> flood;
  for (int i = 0; i < 4; ++i) flood.emplace_back(io, server.port());
  std::this_thread::sleep_for(Millis(200));
  EXPECT_EQ(log.count("slots were full"), 0u);
  flood.emplace_back(io, server.port());
  EXPECT_TRUE(flood[0].closed_within(Millis(2000)));
  for (size_t i = 1; i < flood.size(); ++i) EXPECT_FALSE(flood[i].closed_within(Millis(20))) << i;
  EXPECT_EQ(log.count("slots were full"), 1u);
}

// Peers handshaking from several threads while a flood evicts around them: every peer gets
// in, and the evictions race the handshake threads' own endings (run under TSan too).
TEST(HandshakeSlotsTest, PeersGetInWhileAFloodEvictsAroundThem) {
  Log log;
  TcpTransport server(keyed("server", Millis(20000), log.fn()));
  server.listen(ListenOptions{});
  std::atomic<bool> flooding{true};
  std::atomic<int> opened{0};
  std::thread flood([&] {
    asio::io_context io;
    std::vector<HalfOpen> held;
    while (flooding) {
      held.emplace_back(io, server.port());
      // However fast, the flood's partial HELLOs go before any peer whose HELLO arrived.
      if (++opened > 8) std::this_thread::sleep_for(Millis(10));
    }
  });
  while (opened < 8) std::this_thread::sleep_for(Millis(5));  // loopback's 8 slots held
  std::atomic<int> accepted{0};
  std::thread acceptor([&] {
    while (accepted < 12 && server.accept(Millis(5000))) ++accepted;
  });
  std::atomic<int> connected{0};
  std::vector<std::thread> peers;
  for (int t = 0; t < 3; ++t) {
    peers.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        TcpTransport client(keyed("peer", Millis(5000)));
        try {
          client.connect("127.0.0.1:" + std::to_string(server.port()), Millis(5000));
          ++connected;
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
        }
      }
    });
  }
  for (std::thread& t : peers) t.join();
  flooding = false;
  flood.join();
  acceptor.join();
  EXPECT_EQ(connected, 12);
  EXPECT_EQ(accepted, 12) << log.all();
  EXPECT_GT(log.count("slots were full"), 0u);
}

// The deadline bounds the whole exchange: a peer trickling its HELLO a byte at a time is cut
// off as one that sends nothing.
TEST(HandshakeSlotsTest, TheHandshakeDeadlineCutsOffATrickle) {
  Log log;
  TcpTransport server(keyed("server", Millis(600), log.fn()));
  server.listen(ListenOptions{});
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), server.port()});
  Hello hello{kProtocolVersion, AuthMode::HMAC_SHA256, "trickle", {}, std::nullopt};
  const std::vector<uint8_t> frame = testing::frame_bytes(hello, 0);
  const auto start = Clock::now();
  asio::error_code ec;
  for (size_t i = 0; i < frame.size() && !ec; ++i) {
    asio::write(socket, asio::buffer(&frame[i], 1), ec);
    std::this_thread::sleep_for(Millis(50));
  }
  // Refused long before the whole HELLO (about 50 ms x its bytes) could have arrived.
  EXPECT_TRUE(ec);
  EXPECT_LT(Clock::now() - start, Millis(50) * frame.size() / 2);
  EXPECT_EQ(log.count("timed out in the middle of a frame"), 1u);
}

}  // namespace
}  // namespace herd::net
