// Weight shipping between two in-process connections, over the in-memory loopback and over
// TCP (where, on Linux, chunks are spliced straight into the file and verified there): the
// received file holds exactly the sent tensors (a split model's too, in one file); a transfer cut
// mid-way, a chunk out of order, repeated or corrupted, or a file that cannot be written fails with
// an error saying so and leaves no file (nor its .tmp) behind.
#include "cluster/shipping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "gguf/split.h"
#include "gguf/writer.h"
#include "net/loopback.h"
#include "net/tcp_transport.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// A model file with a tensor larger than one WEIGHTS chunk, so that it travels in pieces.
gguf::File write_model(const fs::path& path) {
  gguf::Writer writer;
  writer.set_string("general.architecture", "llama");
  writer.set_u32("llama.block_count", 1);
  writer.add_tensor("token_embd.weight", TensorType::F32, {1024, 3});
  writer.add_tensor("blk.0.ffn_up.weight", TensorType::F32,
                    {1024, static_cast<int64_t>(net::kWeightsChunkBytes / 4096 + 7)});
  writer.add_tensor("output_norm.weight", TensorType::F32, {5 * 32});
  writer.write(path.string(), [](size_t index, std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 31 + index * 7 + 3);
  });
  return gguf::File::open(path.string());
}

Assignment all_tensors(const gguf::File& file) {
  Assignment a;
  for (const gguf::TensorInfo& t : file.tensors()) {
    a.tensors.push_back({std::string(t.name), t.type, t.shape});
  }
  return a;
}

// The node's end (whose peer is the coordinator) and the coordinator's end of one
// connection, over the transport the test is parameterised with.
struct Ends {
  std::unique_ptr<net::TcpTransport> node_transport, coordinator_transport;
  std::shared_ptr<net::Connection> node, coordinator;
};

Ends connected(const std::string& transport) {
  Ends ends;
  if (transport == "loopback") {
    net::LoopbackPair pair = net::make_loopback_pair("coordinator", "node");
    pair.a->finish_handshake("coordinator", net::FrameLimits{});
    pair.b->finish_handshake("node", net::FrameLimits{});
    ends.node = pair.a;
    ends.coordinator = pair.b;
    return ends;
  }
  net::TcpTransportOptions options;
  options.auth = net::AuthConfig{"node", nullptr};
  // "tcp": sealed frames, each chunk opened in memory and written with pwrite;
  // "tcp_splice": plaintext (--insecure), spliced into the file; "tcp_writes": plaintext
  // through a buffer, the path macOS takes.
  options.auth.plaintext = transport != "tcp";
  options.tcp.splice_weights = transport != "tcp_writes";
  ends.node_transport = std::make_unique<net::TcpTransport>(options);
  ends.node_transport->listen(net::ListenOptions{});
  options.auth.node_name = "coordinator";
  ends.coordinator_transport = std::make_unique<net::TcpTransport>(options);
  ends.coordinator = ends.coordinator_transport->connect(
      "127.0.0.1:" + std::to_string(ends.node_transport->port()), net::Millis(5000));
  ends.node = ends.node_transport->accept(net::Millis(5000));
  if (!ends.node) throw Error("test", "no connection");
  return ends;
}

class ShippingTest : public ::testing::TestWithParam<std::string> {};

// Forwards to a connection; a subclass changes what is sent.
class ForwardingConnection : public net::Connection {
 public:
  explicit ForwardingConnection(net::Connection& inner) : inner_(inner) {}
  void send_frame_parts(const net::FrameHeader& header,
                        std::span<const net::ConstBytes> parts) override {
    inner_.send_frame_parts(header, parts);
  }
  bool try_send_frame(const net::FrameHeader& header, net::ConstBytes payload) override {
    return inner_.try_send_frame(header, payload);
  }
  std::optional<net::Frame> try_recv_frame(net::Millis timeout) override {
    return inner_.try_recv_frame(timeout);
  }
  void fail(const std::string& reason) override { inner_.fail(reason); }
  void close() override { inner_.close(); }
  bool is_open() const override { return inner_.is_open(); }
  net::Millis silent_for() const override { return inner_.silent_for(); }
  std::string peer_name() const override { return inner_.peer_name(); }
  void finish_handshake(const std::string& name, const net::FrameLimits& limits) override {
    inner_.finish_handshake(name, limits);
  }
  net::ConnectionStats stats() const override { return inner_.stats(); }

 protected:
  net::Connection& inner_;
};

// Fails the connection after `frames` frames, as a coordinator that dies in the middle of
// a transfer.
class CutConnection final : public ForwardingConnection {
 public:
  CutConnection(net::Connection& inner, int frames) : ForwardingConnection(inner), left_(frames) {}
  void send_frame_parts(const net::FrameHeader& header,
                        std::span<const net::ConstBytes> parts) override {
    if (left_-- == 0) {
      inner_.close();
      throw Error("test", "cut");
    }
    inner_.send_frame_parts(header, parts);
  }

 private:
  int left_;
};

// Pauses after the metadata (frame 0), so that the node has set up its file and every
// tensor chunk can be placed in it; frame `target` goes out with one byte of its data
// flipped (its hash kept), or twice.
class DamagingConnection final : public ForwardingConnection {
 public:
  enum class Damage { kNone, kFlipAByte, kRepeat };
  DamagingConnection(net::Connection& inner, int target, Damage damage)
      : ForwardingConnection(inner), target_(target), damage_(damage) {}
  void send_frame_parts(const net::FrameHeader& header,
                        std::span<const net::ConstBytes> parts) override {
    if (sent_ == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (sent_++ != target_ || damage_ == Damage::kNone)
      return inner_.send_frame_parts(header, parts);
    if (damage_ == Damage::kRepeat) {
      inner_.send_frame_parts(header, parts);
      return inner_.send_frame_parts(header, parts);
    }
    std::vector<uint8_t> data(parts.back().begin(), parts.back().end());
    data[data.size() / 2] ^= 0x40;
    std::vector<net::ConstBytes> damaged(parts.begin(), parts.end());
    damaged.back() = data;
    inner_.send_frame_parts(header, damaged);
  }

 private:
  int sent_ = 0;
  const int target_;
  const Damage damage_;
};

// Runs ship_weights through `sender` (which may throw when the node gives up first) beside
// receive_weights, and returns the receiver's error; "" when it succeeded.
std::string receive_error(Ends& ends, net::Connection& sender, const gguf::File& model,
                          const Assignment& sent, const Assignment& expected, const fs::path& out) {
  auto shipping = std::async(std::launch::async, [&] {
    try {
      ship_weights(sender, model, ModelInfo{}, sent);
    } catch (const Error&) {
    }
  });
  std::string error;
  try {
    receive_weights(*ends.node, expected, out, net::Millis(10000));
  } catch (const Error& e) {
    error = e.what();
  }
  ends.node->close();
  shipping.get();
  return error;
}

TEST_P(ShippingTest, TheReceivedFileHoldsExactlyTheSentTensors) {
  const TempDir dir("shipping-test", "round-trip");
  const gguf::File model = write_model(dir / "model.gguf");
  const Assignment a = all_tensors(model);
  Ends ends = connected(GetParam());
  DamagingConnection sender(*ends.coordinator, -1, DamagingConnection::Damage::kNone);
  auto sent =
      std::async(std::launch::async, [&] { return ship_weights(sender, model, ModelInfo{}, a); });
  const ShipStats got = receive_weights(*ends.node, a, dir / "shard.gguf", net::Millis(10000));
  EXPECT_EQ(got.bytes, sent.get().bytes);
  // Over TCP every tensor went from the socket straight into the file (spliced on Linux,
  // written through a buffer by "tcp_writes" and on macOS).
  uint64_t tensor_bytes = 0;
  for (const gguf::TensorInfo& t : model.tensors()) tensor_bytes += t.n_bytes;
  EXPECT_EQ(got.placed_bytes, GetParam() == "loopback" ? 0 : tensor_bytes);
  EXPECT_FALSE(fs::exists(dir / "shard.gguf.tmp"));

  const gguf::File shard = gguf::File::open((dir / "shard.gguf").string());
  ASSERT_EQ(shard.tensors().size(), model.tensors().size());
  for (const gguf::TensorInfo& t : model.tensors()) {
    const gguf::TensorInfo& r = shard.tensor(t.name);
    ASSERT_EQ(r.n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(r.data, t.data, t.n_bytes), 0) << t.name;
  }
  EXPECT_EQ(shard.metadata().size(), model.metadata().size());
}

TEST_P(ShippingTest, ASplitModelShipsAsOneFile) {
  const TempDir dir("shipping-test", "split");
  const gguf::File whole = write_model(dir / "model.gguf");
  const std::vector<std::string> paths = gguf::write_split(whole, (dir / "M").string(), 3);
  const gguf::File model = gguf::File::open(paths[0]);
  ASSERT_EQ(model.n_files(), 3u);
  const Assignment a = all_tensors(model);
  Ends ends = connected(GetParam());
  auto sent = std::async(std::launch::async,
                         [&] { return ship_weights(*ends.coordinator, model, ModelInfo{}, a); });
  receive_weights(*ends.node, a, dir / "shard.gguf", net::Millis(10000));
  sent.get();
  // One file that says nothing of the set it came from, with every tensor of every file.
  const gguf::File shard = gguf::File::open((dir / "shard.gguf").string());
  EXPECT_EQ(shard.n_files(), 1u);
  EXPECT_FALSE(shard.has(gguf::kSplitCount));
  EXPECT_EQ(shard.metadata().size(), whole.metadata().size());
  ASSERT_EQ(shard.tensors().size(), whole.tensors().size());
  for (const gguf::TensorInfo& t : whole.tensors()) {
    const gguf::TensorInfo& r = shard.tensor(t.name);
    ASSERT_EQ(r.n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(r.data, t.data, t.n_bytes), 0) << t.name;
  }
}

TEST_P(ShippingTest, ATransferCutMidwayLeavesNoFile) {
  const TempDir dir("shipping-test", "cut");
  const gguf::File model = write_model(dir / "model.gguf");
  const Assignment a = all_tensors(model);
  // Metadata, the first tensor and the first chunk of the second, then the peer is gone.
  for (int frames : {1, 3}) {
    Ends ends = connected(GetParam());
    CutConnection cut(*ends.coordinator, frames);
    EXPECT_THAT(receive_error(ends, cut, model, a, a, dir / "shard.gguf"),
                HasSubstr("coordinator"));
    EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
    EXPECT_FALSE(fs::exists(dir / "shard.gguf.tmp"));
  }
}

TEST_P(ShippingTest, TensorsOutOfOrderAreRefusedNamingTheTensor) {
  const TempDir dir("shipping-test", "order");
  const gguf::File model = write_model(dir / "model.gguf");
  Assignment sent_order = all_tensors(model);
  Assignment expected_order = sent_order;
  std::swap(expected_order.tensors[1], expected_order.tensors[2]);
  Ends ends = connected(GetParam());
  EXPECT_THAT(
      receive_error(ends, *ends.coordinator, model, sent_order, expected_order, dir / "shard.gguf"),
      HasSubstr("expected tensor 'output_norm.weight'"));
  EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
  EXPECT_FALSE(fs::exists(dir / "shard.gguf.tmp"));
}

// The node's error when the model is shipped with frame `frame` damaged, after checking that
// it left neither the file nor its .tmp behind. Frames: 0 the metadata, 1 token_embd, 2 and
// 3 the two chunks of blk.0.ffn_up.
std::string damaged_error(const std::string& transport, const fs::path& dir,
                          const gguf::File& model, int frame, DamagingConnection::Damage damage) {
  const Assignment a = all_tensors(model);
  Ends ends = connected(transport);
  DamagingConnection damaging(*ends.coordinator, frame, damage);
  const std::string error = receive_error(ends, damaging, model, a, a, dir / "shard.gguf");
  EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
  EXPECT_FALSE(fs::exists(dir / "shard.gguf.tmp"));
  return error;
}

TEST_P(ShippingTest, ACorruptedChunkIsRefusedWhereverItLanded) {
  const TempDir dir("shipping-test", "corrupt");
  const gguf::File model = write_model(dir / "model.gguf");
  for (int frame : {1, 3}) {
    EXPECT_THAT(
        damaged_error(GetParam(), dir, model, frame, DamagingConnection::Damage::kFlipAByte),
        HasSubstr("does not match its hash"));
  }
}

TEST_P(ShippingTest, AChunkSentTwiceIsRefused) {
  const TempDir dir("shipping-test", "repeat");
  const gguf::File model = write_model(dir / "model.gguf");
  // The first chunk again where the second belongs; the last again where the next tensor does.
  EXPECT_THAT(damaged_error(GetParam(), dir, model, 2, DamagingConnection::Damage::kRepeat),
              ContainsRegex("chunk at offset 0 .* expected offset"));
  EXPECT_THAT(damaged_error(GetParam(), dir, model, 3, DamagingConnection::Damage::kRepeat),
              HasSubstr("expected tensor 'output_norm.weight'"));
}

TEST_P(ShippingTest, AFileThatCannotBeWrittenFailsTheTransfer) {
  const TempDir dir("shipping-test", "unwritable");
  const gguf::File model = write_model(dir / "model.gguf");
  const Assignment a = all_tensors(model);
  fs::create_directories(dir / "shard.gguf.tmp");  // in the way of the file being written
  Ends ends = connected(GetParam());
  EXPECT_THAT(receive_error(ends, *ends.coordinator, model, a, a, dir / "shard.gguf"),
              HasSubstr("cannot create"));
  EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
}

INSTANTIATE_TEST_SUITE_P(Transports, ShippingTest,
                         ::testing::Values("loopback", "tcp", "tcp_splice", "tcp_writes"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace herd::cluster
