// Frame encryption on real sockets: a man in the middle between two TCP transports
// tampers with, replays or reorders the connector's sealed frames, and the acceptor must
// drop the connection naming the peer, having delivered only the frames before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio.hpp>
#include <thread>

#include "net/tcp_transport.h"
#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

enum class Attack { NONE, TAMPER, REPLAY, SWAP };

// Forwards one connection to 127.0.0.1:target: the acceptor's bytes as they come, the
// connector's frame by frame (28-byte header, payload, and a 16-byte tag for every frame
// but HELLO when `sealed`), doing `attack` to its sealed frame number `at` (0: the first
// after the handshake). `seen` gets every frame's bytes, so a test can look for plaintext.
class Mitm {
 public:
  Mitm(uint16_t target, Attack attack, size_t at, bool sealed)
      : target_(target), attack_(attack), at_(at), sealed_(sealed) {
    thread_ = std::thread([this] { run(); });
  }
  ~Mitm() {
    asio::error_code ignored;
    client_.close(ignored);
    server_.close(ignored);
    acceptor_.close(ignored);
    thread_.join();
    if (back_.joinable()) back_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::vector<uint8_t> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  void run() {
    asio::error_code ec;
    acceptor_.accept(client_, ec);
    if (ec) return;
    server_.connect({asio::ip::make_address("127.0.0.1"), target_}, ec);
    if (ec) return;
    back_ = std::thread([this] {
      std::vector<uint8_t> buffer(1 << 16);
      asio::error_code e;
      for (;;) {
        size_t n = server_.read_some(asio::buffer(buffer), e);
        if (e || asio::write(client_, asio::buffer(buffer.data(), n), e) != n || e) return;
      }
    });
    std::optional<std::vector<uint8_t>> held;  // SWAP: frame `at`, sent after the next one
    for (size_t index = 0;;) {
      std::vector<uint8_t> frame(kFrameHeaderSize);
      if (asio::read(client_, asio::buffer(frame), ec) != frame.size() || ec) return;
      const FrameHeader h = decode_header(frame, FrameLimits{});
      const bool is_sealed = sealed_ && h.type != MessageType::HELLO;
      frame.resize(kFrameHeaderSize + h.length + (is_sealed ? kFrameTagBytes : 0));
      asio::read(client_,
                 asio::buffer(frame.data() + kFrameHeaderSize, frame.size() - kFrameHeaderSize),
                 ec);
      if (ec) return;
      {
        std::lock_guard lock(mutex_);
        seen_.insert(seen_.end(), frame.begin(), frame.end());
      }
      std::vector<std::vector<uint8_t>> out = {frame};
      if (is_sealed && index++ == at_) {
        if (attack_ == Attack::TAMPER) out[0][kFrameHeaderSize + 3] ^= 0x10;
        if (attack_ == Attack::REPLAY) out.push_back(frame);
        if (attack_ == Attack::SWAP) {
          held = frame;
          out.clear();
        }
      } else if (held) {
        out.push_back(*held);
        held.reset();
      }
      for (const auto& f : out) {
        if (asio::write(server_, asio::buffer(f), ec) != f.size() || ec) return;
      }
    }
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::ip::tcp::socket client_{io_};
  asio::ip::tcp::socket server_{io_};
  const uint16_t target_;
  const Attack attack_;
  const size_t at_;
  const bool sealed_;
  std::mutex mutex_;
  std::vector<uint8_t> seen_;
  std::thread thread_;
  std::thread back_;
};

TcpTransportOptions options_for(const std::string& name, bool plaintext) {
  TcpTransportOptions options;
  options.auth.node_name = name;
  options.auth.key = std::make_shared<const ClusterKey>(
      ClusterKey::from_text("a cluster key for the proxy tests", "test"));
  options.auth.plaintext = plaintext;
  options.handshake_timeout = Millis(2000);
  return options;
}

const std::string kSecret = "secret activations";

// Sends 4 frames through a proxy doing `attack` to frame `at`; returns what the acceptor
// received (their ids) and the error that ended it, if any.
struct Received {
  std::vector<uint64_t> ids;
  std::string error;
  std::vector<uint8_t> wire;  // what the proxy saw
};

Received through_proxy(Attack attack, size_t at, bool plaintext = false) {
  TcpTransport server(options_for("acceptor", plaintext));
  server.listen(ListenOptions{});
  Mitm mitm(server.port(), attack, at, !plaintext);
  TcpTransport client(options_for("connector", plaintext));
  std::shared_ptr<Connection> out =
      client.connect("127.0.0.1:" + std::to_string(mitm.port()), Millis(2000));
  std::shared_ptr<Connection> in = server.accept(Millis(2000));
  EXPECT_TRUE(in);
  if (!in) return {};
  EXPECT_EQ(in->encrypted(), !plaintext);
  for (uint64_t id = 0; id < 4; ++id) {
    const std::string text = kSecret + " #" + std::to_string(id);
    out->send_frame(MessageType::COLLECTIVE, id,
                    ConstBytes(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  Received got;
  try {
    for (int i = 0; i < 4; ++i) {
      Frame frame = in->recv_frame(Millis(3000));
      const std::string text(frame.payload().begin(), frame.payload().end());
      EXPECT_EQ(text, kSecret + " #" + std::to_string(frame.header.id));
      got.ids.push_back(frame.header.id);
    }
  } catch (const Error& e) {
    got.error = e.what();
  }
  got.wire = mitm.seen();
  return got;
}

bool contains(const std::vector<uint8_t>& bytes, const std::string& text) {
  return std::search(bytes.begin(), bytes.end(), text.begin(), text.end()) != bytes.end();
}

TEST(TcpEncryptionTest, AnHonestProxyChangesNothingAndSeesNoPlaintext) {
  Received got = through_proxy(Attack::NONE, 0);
  EXPECT_EQ(got.ids, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(got.error, "");
  EXPECT_FALSE(contains(got.wire, kSecret));
}

TEST(TcpEncryptionTest, InsecureModeSendsPlaintext) {
  Received got = through_proxy(Attack::NONE, 0, /*plaintext=*/true);
  EXPECT_EQ(got.ids, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(contains(got.wire, kSecret));
}

TEST(TcpEncryptionTest, TamperedFrameDropsTheConnection) {
  Received got = through_proxy(Attack::TAMPER, 2);
  EXPECT_EQ(got.ids, (std::vector<uint64_t>{0, 1}));
  EXPECT_THAT(got.error, HasSubstr("[net] peer 'connector (127.0.0.1:"));
  EXPECT_THAT(got.error, HasSubstr("frame 2 (COLLECTIVE, 21 bytes) failed authentication"));
}

TEST(TcpEncryptionTest, ReplayedFrameDropsTheConnection) {
  Received got = through_proxy(Attack::REPLAY, 1);
  EXPECT_EQ(got.ids, (std::vector<uint64_t>{0, 1}));
  EXPECT_THAT(got.error, HasSubstr("peer 'connector (127.0.0.1:"));
  EXPECT_THAT(got.error, HasSubstr("frame 2 (COLLECTIVE, 21 bytes) failed authentication"));
}

TEST(TcpEncryptionTest, SwappedFramesDropTheConnection) {
  Received got = through_proxy(Attack::SWAP, 1);
  EXPECT_EQ(got.ids, (std::vector<uint64_t>{0}));
  EXPECT_THAT(got.error, HasSubstr("peer 'connector (127.0.0.1:"));
  EXPECT_THAT(got.error, HasSubstr("frame 1 (COLLECTIVE, 21 bytes) failed authentication"));
}

}  // namespace
}  // namespace herd::net
