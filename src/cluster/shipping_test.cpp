// Weight shipping between two in-process connections: the received file holds exactly the
// sent tensors; a transfer cut mid-way, a chunk out of order or a file that cannot be
// written fails with an error saying so and leaves no file (nor its .tmp) behind.
#include "cluster/shipping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>

#include "gguf/writer.h"
#include "net/loopback.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

namespace fs = std::filesystem;
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

net::LoopbackPair connected_pair() {
  // a: the node's end, whose peer is the coordinator; b: the coordinator's end.
  net::LoopbackPair pair = net::make_loopback_pair("coordinator", "node");
  pair.a->finish_handshake("coordinator", net::FrameLimits{});
  pair.b->finish_handshake("node", net::FrameLimits{});
  return pair;
}

// Forwards to a connection and fails it after `frames` frames, as a coordinator that dies
// in the middle of a transfer.
class CutConnection final : public net::Connection {
 public:
  CutConnection(net::Connection& inner, int frames) : inner_(inner), frames_left_(frames) {}
  void send_frame_parts(const net::FrameHeader& header,
                        std::span<const net::ConstBytes> parts) override {
    if (frames_left_-- == 0) {
      inner_.close();
      throw Error("test", "cut");
    }
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

 private:
  net::Connection& inner_;
  int frames_left_;
};

TEST(ShippingTest, TheReceivedFileHoldsExactlyTheSentTensors) {
  const TempDir dir("shipping-test", "round-trip");
  const gguf::File model = write_model(dir / "model.gguf");
  const Assignment a = all_tensors(model);
  net::LoopbackPair pair = connected_pair();
  auto sent =
      std::async(std::launch::async, [&] { return ship_weights(*pair.b, model, ModelInfo{}, a); });
  const ShipStats got = receive_weights(*pair.a, a, dir / "shard.gguf", net::Millis(10000));
  EXPECT_EQ(got.bytes, sent.get().bytes);
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

TEST(ShippingTest, ATransferCutMidwayLeavesNoFile) {
  const TempDir dir("shipping-test", "cut");
  const gguf::File model = write_model(dir / "model.gguf");
  const Assignment a = all_tensors(model);
  // Metadata, the first tensor and the first chunk of the second, then the peer is gone.
  for (int frames : {1, 3}) {
    net::LoopbackPair pair = connected_pair();
    auto sent = std::async(std::launch::async, [&] {
      CutConnection cut(*pair.b, frames);
      EXPECT_THROW(ship_weights(cut, model, ModelInfo{}, a), Error);
    });
    try {
      receive_weights(*pair.a, a, dir / "shard.gguf", net::Millis(10000));
      FAIL() << "a cut transfer was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("coordinator"));
    }
    sent.get();
    EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
    EXPECT_FALSE(fs::exists(dir / "shard.gguf.tmp"));
  }
}

TEST(ShippingTest, TensorsOutOfOrderAreRefusedNamingTheTensor) {
  const TempDir dir("shipping-test", "order");
  const gguf::File model = write_model(dir / "model.gguf");
  Assignment sent_order = all_tensors(model);
  Assignment expected_order = sent_order;
  std::swap(expected_order.tensors[1], expected_order.tensors[2]);
  net::LoopbackPair pair = connected_pair();
  auto sent = std::async(std::launch::async, [&] {
    try {
      ship_weights(*pair.b, model, ModelInfo{}, sent_order);
    } catch (const Error&) {
      // The node may close first.
    }
  });
  try {
    receive_weights(*pair.a, expected_order, dir / "shard.gguf", net::Millis(10000));
    FAIL() << "tensors out of order were accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected tensor 'output_norm.weight'"));
  }
  pair.a->close();
  sent.get();
  EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
  EXPECT_FALSE(fs::exists(dir / "shard.gguf.tmp"));
}

TEST(ShippingTest, AFileThatCannotBeWrittenFailsTheTransfer) {
  const TempDir dir("shipping-test", "unwritable");
  const gguf::File model = write_model(dir / "model.gguf");
  const Assignment a = all_tensors(model);
  fs::create_directories(dir / "shard.gguf.tmp");  // in the way of the file being written
  net::LoopbackPair pair = connected_pair();
  auto sent = std::async(std::launch::async, [&] {
    try {
      ship_weights(*pair.b, model, ModelInfo{}, a);
    } catch (const Error&) {
    }
  });
  try {
    receive_weights(*pair.a, a, dir / "shard.gguf", net::Millis(10000));
    FAIL() << "an unwritable file was reported written";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot create"));
  }
  pair.a->close();
  sent.get();
  EXPECT_FALSE(fs::exists(dir / "shard.gguf"));
}

}  // namespace
}  // namespace herd::cluster
