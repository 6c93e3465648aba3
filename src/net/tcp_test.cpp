#include "net/tcp.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio.hpp>
#include <future>
#include <numeric>
#include <thread>

#include "net/heartbeat.h"
#include "net/tcp_transport.h"
#include "net/test_log.h"
#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const char* kHexKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::shared_ptr<const ClusterKey> test_key(std::string_view text = kHexKey) {
  return std::make_shared<const ClusterKey>(ClusterKey::from_text(text, "test"));
}

using Log = TestLog;

TcpTransportOptions options_for(const std::string& name, std::shared_ptr<const ClusterKey> key,
                                LogFn log = {}) {
  TcpTransportOptions options;
  options.auth = AuthConfig{name, std::move(key)};
  options.handshake_timeout = Millis(1000);
  options.log = std::move(log);
  return options;
}

std::string local(uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

// Writes raw bytes to a listener, as a non-herd or hostile client would.
void send_raw(uint16_t port, std::string_view bytes) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(socket, asio::buffer(bytes.data(), bytes.size()));
  std::this_thread::sleep_for(Millis(50));
}

TEST(TcpTest, ParsesAddresses) {
  EXPECT_EQ(parse_address("10.0.0.2:7000"), (std::pair<std::string, uint16_t>{"10.0.0.2", 7000}));
  EXPECT_EQ(parse_address("[::1]:80"), (std::pair<std::string, uint16_t>{"::1", 80}));
  EXPECT_EQ(parse_address("mini.local:1"), (std::pair<std::string, uint16_t>{"mini.local", 1}));
  for (const char* bad : {"", "host", "host:", ":80", "host:99999", "host:8x", "::1:80", "[::1"}) {
    EXPECT_THROW(parse_address(bad), Error) << bad;
  }
}

TEST(TcpTest, NonLoopbackBindNeedsKeyOrInsecureListen) {
  EXPECT_THAT(
      [] {
        TcpListener::bind(ListenOptions{"0.0.0.0", 0, false, false}, TcpOptions{});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("without a cluster key")));
  EXPECT_NO_THROW(TcpListener::bind(ListenOptions{"0.0.0.0", 0, true, false}, TcpOptions{}));
  EXPECT_NO_THROW(TcpListener::bind(ListenOptions{"0.0.0.0", 0, false, true}, TcpOptions{}));
  EXPECT_NO_THROW(TcpListener::bind(ListenOptions{"127.0.0.1", 0, false, false}, TcpOptions{}));
  TcpTransport keyless(options_for("n", nullptr));
  EXPECT_THROW(keyless.listen(ListenOptions{"0.0.0.0", 0}), Error);
}

TEST(TcpTest, TwoEndpointsExchangeFrames) {
  TcpTransport server(options_for("server", test_key()));
  server.listen(ListenOptions{});
  TcpTransport client(options_for("client", test_key()));
  std::shared_ptr<Connection> to_server = client.connect(local(server.port()), Millis(2000));
  std::shared_ptr<Connection> to_client = server.accept(Millis(2000));
  ASSERT_TRUE(to_client);
  EXPECT_THAT(to_server->peer_name(), HasSubstr("server (127.0.0.1:"));
  EXPECT_THAT(to_client->peer_name(), HasSubstr("client (127.0.0.1:"));

  // A 32 MiB WEIGHTS chunk one way, a RESULT the other.
  ConnectionStats server_before = to_server->stats();
  ConnectionStats client_before = to_client->stats();
  std::vector<uint8_t> chunk(32 << 20);
  std::iota(chunk.begin(), chunk.end(), uint8_t{0});
  send_message(*to_server, 11, Weights{"output.weight", 0, chunk.size(), chunk_hash(chunk), chunk});
  Frame frame;
  Weights got = recv_message<Weights>(*to_client, Millis(5000), frame);
  EXPECT_EQ(frame.header.id, 11u);
  EXPECT_EQ(got.tensor_name, "output.weight");
  EXPECT_TRUE(std::equal(got.data.begin(), got.data.end(), chunk.begin(), chunk.end()));

  std::vector<float> logits = {0.5f, -1.f, 2.f};
  Activations out{WireDType::F32, 1, 3,
                  ConstBytes(reinterpret_cast<const uint8_t*>(logits.data()), 12)};
  send_message(*to_client, 11, Result{ResultKind::LOGITS, out});
  Result result = recv_message<Result>(*to_server, Millis(2000), frame);
  EXPECT_EQ(result.output.cols, 3u);
  EXPECT_EQ(to_server->stats().frames_received - server_before.frames_received, 1u);
  EXPECT_TRUE(to_server->encrypted());
  EXPECT_TRUE(to_client->encrypted());
  EXPECT_EQ(to_client->stats().bytes_received - client_before.bytes_received,
            kFrameHeaderSize + encode(got).size() + kFrameTagBytes);
}

// A transport given no name takes "<host>:<port>" once bound, the port it really got.
TEST(TcpTest, AnUnnamedListenerIsNamedByItsPort) {
  TcpTransport server(options_for("", nullptr));
  server.listen(ListenOptions{});  // port 0: any free one
  EXPECT_THAT(server.node_name(), ::testing::EndsWith(":" + std::to_string(server.port())));
  TcpTransport client(options_for("client", nullptr));
  std::shared_ptr<Connection> to_server = client.connect(local(server.port()), Millis(2000));
  EXPECT_THAT(to_server->peer_name(), HasSubstr(server.node_name() + " (127.0.0.1:"));
}

TEST(TcpTest, GarbageAndHostilePeersAreDroppedAndOthersStillServed) {
  Log log;
  TcpTransport server(options_for("server", test_key(), log.fn()));
  server.listen(ListenOptions{});
  send_raw(server.port(), "GET / HTTP/1.1\r\nHost: herd.example\r\n\r\n");
  send_raw(server.port(), "HERD");  // too short for a header
  // A valid header announcing a 1 TiB HELLO: refused before anything is allocated.
  auto huge = encode_header(FrameHeader{MessageType::HELLO, 0, 0, uint64_t{1} << 40});
  send_raw(server.port(),
           std::string_view(reinterpret_cast<const char*>(huge.data()), huge.size()));
  // A FORWARD before any HELLO.
  auto early = encode_header(FrameHeader{MessageType::FORWARD, 0, 0, 100});
  send_raw(server.port(),
           std::string_view(reinterpret_cast<const char*>(early.data()), early.size()));
  // A wrong key.
  TcpTransport intruder(options_for("intruder", test_key("not the cluster key at all")));
  EXPECT_THAT([&] { intruder.connect(local(server.port()), Millis(2000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("failed to prove the cluster key")));

  TcpTransport client(options_for("client", test_key()));
  auto connection = client.connect(local(server.port()), Millis(2000));
  auto accepted = server.accept(Millis(2000));
  ASSERT_TRUE(accepted);
  EXPECT_THAT(accepted->peer_name(), HasSubstr("client"));
  EXPECT_FALSE(server.accept(Millis(100)));  // nobody else got through

  for (int i = 0; i < 50 && log.all().find("intruder") == std::string::npos; ++i) {
    std::this_thread::sleep_for(Millis(20));
  }
  std::string lines = log.all();
  EXPECT_THAT(lines, HasSubstr("bad magic"));
  EXPECT_THAT(lines, HasSubstr("exceeds the limit"));
  EXPECT_THAT(lines, HasSubstr("FORWARD before the HELLO handshake"));
  EXPECT_THAT(lines, HasSubstr("closed the connection"));
  EXPECT_THAT(lines, HasSubstr("'intruder' (127.0.0.1:"));
  EXPECT_THAT(lines, HasSubstr("refused (authentication failed)"));
  EXPECT_THAT(lines, HasSubstr("accepted 'client (127.0.0.1:"));
  EXPECT_THAT(lines, HasSubstr("': node id "));
}

TEST(TcpTest, SilentConnectionDoesNotDelayOtherPeers) {
  Log log;
  auto options = options_for("server", nullptr, log.fn());
  options.handshake_timeout = Millis(1500);
  TcpTransport server(options);
  server.listen(ListenOptions{});
  asio::io_context io;
  asio::ip::tcp::socket silent(io);
  silent.connect({asio::ip::make_address("127.0.0.1"), server.port()});  // says nothing

  auto start = Clock::now();
  TcpTransport client(options_for("client", nullptr));
  auto connection = client.connect(local(server.port()), Millis(2000));
  ASSERT_TRUE(server.accept(Millis(2000)));
  EXPECT_LT(Clock::now() - start, Millis(1000));  // not behind the silent one's 1.5 s
  for (int i = 0; i < 100 && log.all().find("no HELLO") == std::string::npos; ++i) {
    std::this_thread::sleep_for(Millis(50));
  }
  EXPECT_THAT(log.all(), HasSubstr("no HELLO within 1500 ms"));
}

TEST(TcpTest, MalformedFrameAfterHandshakeDropsThePeerWithAReason) {
  auto options = options_for("server", nullptr);
  options.tcp.limits.activations = 1024;
  TcpTransport server(options);
  server.listen(ListenOptions{});
  TcpTransport client(options_for("client", nullptr));
  auto to_server = client.connect(local(server.port()), Millis(2000));
  auto to_client = server.accept(Millis(2000));
  ASSERT_TRUE(to_client);
  std::vector<uint8_t> big(4096);
  to_server->send_frame(MessageType::FORWARD, 1, big);  // over the server's 1 KiB limit
  EXPECT_THAT([&] { to_client->recv_frame(Millis(2000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("peer 'client (127.0.0.1:")));
  Frame frame;
  EXPECT_THAT([&] { recv_message<Ready>(*to_server, Millis(2000), frame); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "reported protocol error: frame: FORWARD payload of 4096 bytes exceeds")));
}

TEST(TcpTest, ClosedPeerIsAnErrorNamingIt) {
  TcpTransport server(options_for("server", nullptr));
  server.listen(ListenOptions{});
  TcpTransport client(options_for("client", nullptr));
  auto to_server = client.connect(local(server.port()), Millis(2000));
  auto to_client = server.accept(Millis(2000));
  ASSERT_TRUE(to_client);
  send_message(*to_client, 0, Ready{});
  to_client->close();
  Frame frame = to_server->recv_frame(Millis(2000));  // frames sent before the BYE arrive
  EXPECT_EQ(frame.header.type, MessageType::READY);
  EXPECT_THAT([&] { to_server->recv_frame(Millis(2000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("peer 'server (127.0.0.1:")));
  EXPECT_THROW(send_message(*to_server, 0, Ready{}), Error);
}

// A peer that completed the handshake and then stopped (its process frozen): the socket is
// open, nothing answers. The heartbeat turns it into an error naming the peer.
TEST(TcpTest, SilentPeerIsReportedWithinTheHeartbeatTimeout) {
  auto listener = TcpListener::bind(ListenOptions{}, TcpOptions{});
  auto accepted = std::async(std::launch::async, [&] {
    std::shared_ptr<TcpConnection> c = listener->accept(Millis(2000));
    handshake_accept(*c, AuthConfig{"frozen-node", nullptr}, Millis(2000));
    return c;  // never calls finish_handshake: no reader, no PONGs, like a stopped process
  });
  TcpTransport client(options_for("coordinator", nullptr));
  auto connection = client.connect(local(listener->port()), Millis(2000));
  auto frozen = accepted.get();

  // Without a heartbeat, a receive timeout names the peer.
  EXPECT_THAT([&] { connection->recv_frame(Millis(100)); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("peer 'frozen-node (127.0.0.1:" + std::to_string(listener->port()) +
                            ")': no frame within 100 ms")));
  EXPECT_TRUE(connection->is_open());

  Heartbeat heartbeat(HeartbeatOptions{Millis(100), Millis(1000)});
  heartbeat.watch(connection);
  auto start = Clock::now();
  EXPECT_THAT([&] { connection->recv_frame(Millis(60000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("peer 'frozen-node (127.0.0.1:")));
  auto elapsed = Clock::now() - start;
  EXPECT_LT(elapsed, Millis(3000));  // timeout + interval, with slack for a loaded machine
  EXPECT_FALSE(connection->is_open());
}

TEST(TcpTest, BusyPeerAnswersPingsFromItsReaderThread) {
  TcpTransport server(options_for("server", nullptr));
  server.listen(ListenOptions{});
  TcpTransport client(options_for("client", nullptr));
  auto to_server = client.connect(local(server.port()), Millis(2000));
  auto to_client = server.accept(Millis(2000));
  ASSERT_TRUE(to_client);
  Heartbeat heartbeat(HeartbeatOptions{Millis(50), Millis(1000)});
  heartbeat.watch(to_server);
  std::this_thread::sleep_for(Millis(1500));  // the server application never reads
  EXPECT_TRUE(to_server->is_open());
  EXPECT_GT(std::dynamic_pointer_cast<TcpConnection>(to_server)->last_rtt().count(), 0);
}

TEST(TcpTest, SlowReaderGetsEveryFrameInOrder) {
  auto options = options_for("server", nullptr);
  options.tcp.max_queued_bytes = 1 << 20;
  TcpTransport server(options);
  server.listen(ListenOptions{});
  TcpTransport client(options_for("client", nullptr));
  auto to_server = client.connect(local(server.port()), Millis(2000));
  auto to_client = server.accept(Millis(2000));
  ASSERT_TRUE(to_client);
  constexpr int kFrames = 40;
  auto sender = std::async(std::launch::async, [&] {
    std::vector<uint8_t> data(512 << 10);
    for (int i = 0; i < kFrames; ++i) {
      data[0] = static_cast<uint8_t>(i);
      send_message(*to_server, i, Collective{1, 0, 0, data});
    }
  });
  std::this_thread::sleep_for(Millis(300));  // the reader pauses at 1 MiB queued
  EXPECT_EQ(to_client->silent_for().count(), 0);
  for (int i = 0; i < kFrames; ++i) {
    Frame frame;
    Collective c = recv_message<Collective>(*to_client, Millis(5000), frame);
    EXPECT_EQ(frame.header.id, static_cast<uint64_t>(i));
    EXPECT_EQ(c.data[0], static_cast<uint8_t>(i));
  }
  sender.get();
}

TEST(TcpTest, ConnectFailuresNameTheAddress) {
  auto listener = TcpListener::bind(ListenOptions{}, TcpOptions{});
  uint16_t port = listener->port();
  listener.reset();  // nothing listens there now
  TcpTransport client(options_for("client", nullptr));
  EXPECT_THAT([&] { client.connect(local(port), Millis(2000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("connect to " + local(port))));
}

}  // namespace
}  // namespace herd::net
