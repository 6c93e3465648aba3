#include "net/messages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "net/activations.h"
#include "net/test_frames.h"
#include "net/wire_io.h"
#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;
using testing::joined;

template <typename M>
M round_trip(const M& message) {
  std::vector<uint8_t> bytes = joined(encode(message));
  static std::vector<std::vector<uint8_t>> keep;  // decoded spans view these bytes
  keep.push_back(std::move(bytes));
  return decode_as<M>(keep.back());
}

template <typename M>
std::string decode_error_text(std::span<const uint8_t> payload) {
  try {
    decode_as<M>(payload);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(MessagesTest, HelloRoundTrips) {
  Hello in{kProtocolVersion, AuthMode::HMAC_SHA256, "gpu-box.local:7000", {}, std::nullopt};
  for (size_t i = 0; i < in.nonce.size(); ++i) in.nonce[i] = static_cast<uint8_t>(i);
  Hello out = round_trip(in);
  EXPECT_EQ(out.node_name, in.node_name);
  EXPECT_EQ(out.nonce, in.nonce);
  EXPECT_EQ(out.auth, AuthMode::HMAC_SHA256);
  EXPECT_FALSE(out.proof);
  in.proof = Proof{};
  (*in.proof)[5] = 77;
  out = round_trip(in);
  ASSERT_TRUE(out.proof);
  EXPECT_EQ(*out.proof, *in.proof);
  EXPECT_EQ(out.encryption, FrameEncryption::XCHACHA20_POLY1305);
  EXPECT_FALSE(out.signature);
  in.encryption = FrameEncryption::PLAINTEXT;
  in.kx_public[0] = 1;
  in.node_id[31] = 2;
  in.signature.emplace();
  (*in.signature)[63] = 3;
  out = round_trip(in);
  EXPECT_EQ(out.encryption, FrameEncryption::PLAINTEXT);
  EXPECT_EQ(out.kx_public, in.kx_public);
  EXPECT_EQ(out.node_id, in.node_id);
  ASSERT_TRUE(out.signature);
  EXPECT_EQ(*out.signature, *in.signature);
}

TEST(MessagesTest, ProfileLoadPingErrorRoundTrip) {
  Profile p = round_trip(Profile{"mini-1", 10, 32ull << 30, 20ull << 30, 100.0, 900.5, "{}"});
  EXPECT_EQ(p.node_name, "mini-1");
  EXPECT_EQ(p.cores, 10u);
  EXPECT_EQ(p.free_memory, 20ull << 30);
  EXPECT_EQ(p.matmul_gflops, 900.5);
  Load l = round_trip(Load{"{\"stage\":1}", ContentHash{3, 4}, "/m.gguf"});
  EXPECT_EQ(l.plan_json, "{\"stage\":1}");
  EXPECT_EQ(l.model_hash, (ContentHash{3, 4}));
  EXPECT_EQ(l.model_path_hint, "/m.gguf");
  EXPECT_EQ(round_trip(Ping{99}).timestamp_ns, 99u);
  EXPECT_EQ(round_trip(Pong{98}).timestamp_ns, 98u);
  ErrorReply e = round_trip(ErrorReply{ErrorCode::FORWARD_FAILED, "out of memory"});
  EXPECT_EQ(e.code, ErrorCode::FORWARD_FAILED);
  EXPECT_EQ(e.message, "out of memory");
  EXPECT_EQ(error_code_name(static_cast<ErrorCode>(77)), "error 77");
}

TEST(MessagesTest, LoadCarriesTheStoreNameWhenTheCoordinatorHasOne) {
  Load in{"{}", ContentHash{5, 6}, "/store/a/b/m-00001-of-00002.gguf"};
  EXPECT_FALSE(round_trip(in).store_name);  // the layout before store names, unchanged
  in.store_name = StoreName{"bartowski/Qwen3-8B-GGUF", "Q4_K_M/Qwen3-8B-Q4_K_M.gguf", 1234};
  Load out = round_trip(in);
  ASSERT_TRUE(out.store_name);
  EXPECT_EQ(*out.store_name, *in.store_name);
  EXPECT_EQ(out.plan_json, "{}");
  in.store_name = StoreName{"", "m.gguf", 7};  // a path: its base name alone
  out = round_trip(in);
  ASSERT_TRUE(out.store_name);
  EXPECT_EQ(*out.store_name, *in.store_name);
}

// A LOAD whose store name is `repo`, `file`, then `size_bytes` bytes of size (8: whole).
std::vector<uint8_t> load_with_store_name(std::string_view repo, std::string_view file,
                                          size_t size_bytes = 8) {
  WireWriter w;
  w.u64(1);
  w.u64(2);
  w.string("");
  w.string("{}");
  w.string(repo);
  w.string(file);
  for (size_t i = 0; i < size_bytes; ++i) w.u8(0);
  return w.take();
}

TEST(MessagesTest, HostileStoreNamesAreRefusedNamingTheField) {
  EXPECT_EQ(decode_error_text<Load>(load_with_store_name("a/b", "x/m.gguf")), "");
  EXPECT_THAT(decode_error_text<Load>(load_with_store_name("a/b", "../../etc/passwd")),
              HasSubstr("LOAD: field 'store_file': '../../etc/passwd' is not a relative path"));
  for (std::string_view file :
       {"", "/abs.gguf", "a//b.gguf", "a/./b.gguf", "a\\b.gguf", "a/..", "bad\x01.gguf"}) {
    EXPECT_THAT(decode_error_text<Load>(load_with_store_name("a/b", file)),
                HasSubstr("field 'store_file'"))
        << file;
  }
  EXPECT_THAT(decode_error_text<Load>(load_with_store_name("a/\nb", "m.gguf")),
              HasSubstr("field 'store_repo': not printable"));
  EXPECT_THAT(decode_error_text<Load>(load_with_store_name(std::string(300, 'a'), "m.gguf")),
              HasSubstr("field 'store_repo'"));
  EXPECT_THAT(decode_error_text<Load>(load_with_store_name("a/b", "m.gguf", 5)),
              HasSubstr("field 'store_size'"));
  // Cut inside the repository's string: named, not read past the payload.
  std::vector<uint8_t> cut = load_with_store_name("a/b", "m.gguf");
  cut.resize(cut.size() - 8 - 4 - 6 - 2);
  EXPECT_THAT(decode_error_text<Load>(cut), HasSubstr("field 'store_repo'"));
  // Every cut of a LOAD with a store name fails but the one before the name, which reads as
  // a LOAD without one: harmless, the name only spares shipping (and is checked by hash).
  const std::vector<uint8_t> whole = load_with_store_name("a/b", "m.gguf");
  const size_t without = whole.size() - (4 + 3) - (4 + 6) - 8;
  for (size_t n = 0; n < whole.size(); ++n) {
    const std::string error = decode_error_text<Load>(ConstBytes(whole.data(), n));
    EXPECT_EQ(error.empty(), n == without) << n << ": " << error;
  }
  // Bytes after the size are refused as trailing bytes.
  std::vector<uint8_t> longer = load_with_store_name("a/b", "m.gguf", 9);
  EXPECT_THAT(decode_error_text<Load>(longer), HasSubstr("LOAD"));
  EXPECT_NE(decode_error_text<Load>(longer), "");
}

TEST(MessagesTest, WeightsCarryDataAsTailAndVerifyTheHash) {
  std::vector<uint8_t> data(1000, 3);
  Weights in{"token_embd.weight", 1000, 5000, chunk_hash(data), data};
  Payload payload = encode(in);
  EXPECT_EQ(payload.tail.data(), data.data());  // no copy of the chunk
  Weights out = round_trip(in);
  EXPECT_EQ(out.tensor_name, "token_embd.weight");
  EXPECT_EQ(out.offset, 1000u);
  EXPECT_EQ(out.total_size, 5000u);
  EXPECT_TRUE(std::equal(out.data.begin(), out.data.end(), data.begin(), data.end()));

  std::vector<uint8_t> bytes = joined(payload);
  bytes.back() ^= 1;
  EXPECT_THAT(decode_error_text<Weights>(bytes),
              HasSubstr("'token_embd.weight' chunk at offset 1000 does not match its hash"));
}

TEST(MessagesTest, WeightsChunkOutsideTheTensorIsRejected) {
  std::vector<uint8_t> data(16, 1);
  Weights in{"t", 0, 16, chunk_hash(data), data};
  std::vector<uint8_t> bytes = joined(encode(in));
  // total_size sits after u32 length + "t" + u64 offset.
  store_le<uint64_t>(bytes.data() + 4 + 1 + 8, 15);
  EXPECT_THAT(decode_error_text<Weights>(bytes),
              HasSubstr("WEIGHTS: field 'offset': chunk [0, +16) lies outside"));
  store_le<uint64_t>(bytes.data() + 4 + 1, ~uint64_t{0});  // offset near 2^64: no overflow
  store_le<uint64_t>(bytes.data() + 4 + 1 + 8, ~uint64_t{0});
  EXPECT_THAT(decode_error_text<Weights>(bytes), HasSubstr("lies outside"));
}

TEST(MessagesTest, ForwardAndResultRoundTrip) {
  std::vector<float> hidden = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> storage;
  Forward in;
  in.batch.add(100, 0, 0, false);
  in.batch.add(101, 0, 1, true);
  in.activations = encode_activations(hidden, 2, 3, WireDType::F16, storage);
  Forward out = round_trip(in);
  EXPECT_EQ(out.batch.tokens, in.batch.tokens);
  EXPECT_EQ(out.batch.pos, in.batch.pos);
  EXPECT_EQ(out.batch.want_logits, in.batch.want_logits);
  EXPECT_EQ(out.activations.dtype, WireDType::F16);
  std::vector<float> back(6);
  decode_activations(out.activations, back);
  EXPECT_EQ(back, hidden);  // small integers are exact in f16

  Result r = round_trip(
      Result{ResultKind::HIDDEN, encode_activations(hidden, 3, 2, WireDType::F32, storage)});
  EXPECT_EQ(r.kind, ResultKind::HIDDEN);
  EXPECT_EQ(r.output.rows, 3u);
  decode_activations(r.output, back);
  EXPECT_EQ(back, hidden);
}

TEST(MessagesTest, StageTimesTravelAfterTheActivations) {
  std::vector<float> hidden = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> storage;
  Forward in;
  in.batch.add(100, 0, 0, false);
  in.batch.add(101, 0, 1, true);
  in.activations = encode_activations(hidden, 2, 3, WireDType::F32, storage);
  const uint64_t plain = encode(in).size();
  in.upstream_ns = {11, 22};
  const Payload payload = encode(in);
  EXPECT_EQ(payload.tail.data(), in.activations.data.data());  // the data is not copied
  EXPECT_EQ(payload.size(), plain + 4 + 2 * 8);
  Forward out = round_trip(in);
  EXPECT_EQ(out.upstream_ns, in.upstream_ns);
  std::vector<float> back(6);
  decode_activations(out.activations, back);
  EXPECT_EQ(back, hidden);

  Result r{ResultKind::HIDDEN, encode_activations(hidden, 3, 2, WireDType::F32, storage), 5};
  r.upstream_ns = {7, 8, 9};
  Result r2 = round_trip(r);
  EXPECT_EQ(r2.compute_ns, 5u);
  EXPECT_EQ(r2.upstream_ns, r.upstream_ns);
  // Without stage times: the version-1 layout, and an empty list.
  r.upstream_ns.clear();
  EXPECT_TRUE(round_trip(r).upstream_ns.empty());

  // No flag but a list, the flag but no list, an empty list, a count past the end, a short
  // value, a byte too many.
  std::vector<uint8_t> bytes = joined(encode(in));
  const size_t dtype = 4 + 2 * 13, ext = bytes.size() - (4 + 16);
  EXPECT_EQ(bytes[dtype], kStageTimesFlag);
  std::vector<uint8_t> bad = bytes;
  bad[dtype] = 0;
  EXPECT_THROW(decode_forward(bad), Error);
  bad.resize(ext);
  EXPECT_NO_THROW(decode_forward(bad));
  bad[dtype] = kStageTimesFlag;
  EXPECT_THROW(decode_forward(bad), Error);
  bad = bytes;
  store_le<uint32_t>(bad.data() + ext, 0);
  bad.resize(ext + 4);
  EXPECT_THROW(decode_forward(bad), Error);
  bad = bytes;
  store_le<uint32_t>(bad.data() + ext, 0xffffffff);
  EXPECT_THROW(decode_forward(bad), Error);
  bad = bytes;
  bad.pop_back();
  EXPECT_THROW(decode_forward(bad), Error);
  bad = bytes;
  bad.push_back(0);
  EXPECT_THROW(decode_forward(bad), Error);
}

TEST(MessagesTest, F16HalvesTheBytesPerToken) {
  EXPECT_EQ(wire_row_bytes(4096, WireDType::F32), 16384u);
  EXPECT_EQ(wire_row_bytes(4096, WireDType::F16), 8192u);
  EXPECT_EQ(parse_wire_dtype("f16"), WireDType::F16);
  EXPECT_THROW(parse_wire_dtype("bf16"), Error);
  std::vector<uint8_t> storage;
  std::vector<float> values = {0.1f, -3.14159f, 65504.f, 1e-8f};
  Activations a = encode_activations(values, 1, 4, WireDType::F16, storage);
  std::vector<float> back(4);
  decode_activations(a, back);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(back[i], values[i], std::abs(values[i]) * 1e-3 + 1e-7);
  }
}

TEST(MessagesTest, Q8RowsAreWholeBlocksWithinHalfAStep) {
  EXPECT_EQ(wire_row_bytes(4096, WireDType::Q8_0), 4096u / 32 * 34);
  EXPECT_EQ(wire_row_bytes(33, WireDType::Q8_0), 68u);  // a partial block is a whole one
  EXPECT_EQ(parse_wire_dtype("q8_0"), WireDType::Q8_0);
  EXPECT_EQ(wire_dtype_name(WireDType::Q8_0), "q8_0");
  const uint32_t rows = 3, cols = 33;
  std::vector<float> values(rows * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.7f * i) * (1 + i % 5);
  values[40] = 0;  // a zero and a block of zeros decode exactly
  std::fill(values.begin() + 66, values.begin() + 98, 0.0f);
  std::vector<uint8_t> storage;
  Activations a = encode_activations(values, rows, cols, WireDType::Q8_0, storage);
  EXPECT_EQ(a.data.size(), rows * 68u);
  Forward in;
  for (uint32_t t = 0; t < rows; ++t) in.batch.add(t, 0, t, true);
  in.activations = a;
  const std::vector<uint8_t> bytes = joined(encode(in));  // what `out` views
  Forward out = decode_forward(bytes);
  std::vector<float> back(values.size());
  decode_activations(out.activations, back);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t block = 0; block < cols; block += 32) {
      float max_abs = 0;
      const uint32_t end = std::min(cols, block + 32);
      for (uint32_t c = block; c < end; ++c)
        max_abs = std::max(max_abs, std::abs(values[r * cols + c]));
      for (uint32_t c = block; c < end; ++c) {
        const size_t i = r * cols + c;
        EXPECT_NEAR(back[i], values[i], max_abs / 254 * 1.01f + 1e-7f)
            << "row " << r << " col " << c;
      }
    }
  }
  EXPECT_EQ(back[40], 0.0f);
  for (size_t i = 66; i < 98; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(MessagesTest, ForwardRowsMustMatchTokens) {
  std::vector<float> hidden(6, 1.f);
  Forward in;
  in.batch.add(1, 0, 0, true);
  in.batch.add(2, 0, 1, true);
  std::vector<uint8_t> storage;
  in.activations = encode_activations(hidden, 2, 3, WireDType::F32, storage);
  std::vector<uint8_t> bytes = joined(encode(in));
  // Rewrite the row count (after u32 n + 2 tokens x 13 bytes + u8 dtype) to 3 and cols to 2.
  size_t at = 4 + 2 * 13 + 1;
  store_le<uint32_t>(bytes.data() + at, 3);
  store_le<uint32_t>(bytes.data() + at + 4, 2);
  EXPECT_THAT(decode_error_text<Forward>(bytes), HasSubstr("3 activation rows for 2 tokens"));
}

TEST(MessagesTest, ForwardCountsThatCannotFitAreRejectedBeforeAllocating) {
  std::vector<uint8_t> bytes(4 + 13);
  store_le<uint32_t>(bytes.data(), 60000);  // 60000 tokens announced, one present
  EXPECT_THAT(decode_error_text<Forward>(bytes),
              HasSubstr("FORWARD: field 'n_tokens': count 60000 needs 780000 bytes, 13 left"));
  store_le<uint32_t>(bytes.data(), 0xffffffff);
  EXPECT_THAT(decode_error_text<Forward>(bytes), HasSubstr("exceeds the maximum"));
}

TEST(MessagesTest, ActivationShapeOverflowIsRejected) {
  WireWriter w;
  w.u8(static_cast<uint8_t>(ResultKind::LOGITS));
  w.u64(0);           // compute_ns
  w.u8(0);            // f32
  w.u32(0x00100000);  // rows = 2^20: allowed
  w.u32(0x01000000);  // cols = 2^24: allowed; rows*cols*4 = 2^46 bytes
  w.u64(uint64_t{1} << 46);
  std::vector<uint8_t> bytes = w.take();
  EXPECT_THAT(decode_error_text<Result>(bytes), HasSubstr("RESULT: field 'data': truncated"));
  bytes[9] = 7;
  EXPECT_THAT(decode_error_text<Result>(bytes), HasSubstr("unknown activation type 7"));
}

TEST(MessagesTest, StringsPastTheEndAreRejected) {
  Hello in{kProtocolVersion, AuthMode::NONE, "abc", {}, std::nullopt};
  std::vector<uint8_t> bytes = joined(encode(in));
  size_t name_length_at = 2 + 1 + 1 + kNonceBytes + 1 + kKxPublicBytes + kHelloIdBytes + 1;
  store_le<uint32_t>(bytes.data() + name_length_at, 100);
  EXPECT_THAT(decode_error_text<Hello>(bytes),
              HasSubstr("HELLO: field 'node_name': truncated (needs 100 bytes, 3 left)"));
  store_le<uint32_t>(bytes.data() + name_length_at, 0xfffffff0);
  EXPECT_THAT(decode_error_text<Hello>(bytes), HasSubstr("exceeds the maximum 128"));
}

TEST(MessagesTest, NamesMustBePrintable) {
  Hello in{kProtocolVersion, AuthMode::NONE, "abc", {}, std::nullopt};
  std::vector<uint8_t> bytes = joined(encode(in));
  bytes.back() = '\n';
  EXPECT_THAT(decode_error_text<Hello>(bytes), HasSubstr("not printable ASCII"));
  EXPECT_EQ(printable("a\x1b[31mb\xff"), "a?[31mb?");
}

TEST(MessagesTest, BooleansEnumsAndMeasuresAreChecked) {
  Hello in{kProtocolVersion, AuthMode::NONE, "abc", {}, std::nullopt};
  std::vector<uint8_t> bytes = joined(encode(in));
  bytes[3] = 2;  // has_proof
  EXPECT_THAT(decode_error_text<Hello>(bytes), HasSubstr("'has_proof': boolean is 2"));
  bytes[3] = 0;
  bytes[2] = 9;  // auth
  EXPECT_THAT(decode_error_text<Hello>(bytes), HasSubstr("unknown authentication mode 9"));

  std::vector<uint8_t> profile = joined(encode(Profile{"n", 1, 2, 3, 4, 5, ""}));
  double nan = std::nan("");
  std::memcpy(profile.data() + 4 + 1 + 4 + 8 + 8, &nan, 8);
  EXPECT_THAT(decode_error_text<Profile>(profile), HasSubstr("not a finite non-negative number"));
}

TEST(MessagesTest, TrailingBytesAreRejected) {
  std::vector<uint8_t> ready = {0};
  EXPECT_THAT(decode_error_text<Ready>(ready), HasSubstr("READY: 1 trailing bytes"));
  std::vector<uint8_t> ping = joined(encode(Ping{1}));
  ping.push_back(0);
  EXPECT_THAT(decode_error_text<Ping>(ping), HasSubstr("PING: 1 trailing bytes"));
}

TEST(MessagesTest, CollectiveDataMustBeWholeValuesOrBlocks) {
  std::vector<uint8_t> data(12, 0);
  std::vector<uint8_t> bytes = joined(encode(Collective{1, 0, 0, data}));
  const size_t n_bytes_at = 8 + 4 + 8 + 1;  // after op_id, step, offset and dtype
  store_le<uint64_t>(bytes.data() + n_bytes_at, 11);
  bytes.pop_back();
  EXPECT_THAT(decode_error_text<Collective>(bytes), HasSubstr("not a whole number of f32"));

  std::vector<uint8_t> blocks(2 * kQ8BlockBytes, 0);
  Collective q8{2, 1, 64, blocks, WireDType::Q8_0};
  const std::vector<uint8_t> q8_bytes = joined(encode(q8));  // what `back` views
  Collective back = decode_collective(q8_bytes);
  EXPECT_EQ(back.dtype, WireDType::Q8_0);
  EXPECT_EQ(back.offset, 64u);
  EXPECT_EQ(back.data.size(), 68u);
  bytes = joined(encode(q8));
  store_le<uint64_t>(bytes.data() + n_bytes_at, 64);  // 64 bytes: not whole 34-byte blocks
  bytes.resize(bytes.size() - 4);
  EXPECT_THAT(decode_error_text<Collective>(bytes), HasSubstr("not a whole number of q8_0 blocks"));
  bytes = joined(encode(q8));
  bytes[8 + 4 + 8] = 3;  // no such dtype
  EXPECT_THAT(decode_error_text<Collective>(bytes), HasSubstr("unknown activation type 3"));
}

TEST(MessagesTest, AProbeAsksForAtMost16MiBAndSaysHowMuchItCarries) {
  std::vector<uint8_t> data(10, 1);
  std::vector<uint8_t> bytes = joined(encode(Probe{100, data}));
  const Probe back = decode_probe(bytes);
  EXPECT_EQ(back.reply_bytes, 100u);
  EXPECT_EQ(back.data.size(), 10u);
  std::vector<uint8_t> greedy = bytes;
  store_le<uint32_t>(greedy.data(), kMaxProbeBytes + 1);
  EXPECT_THAT(decode_error_text<Probe>(greedy), HasSubstr("reply_bytes"));
  bytes.push_back(0);
  EXPECT_THAT(decode_error_text<Probe>(bytes), HasSubstr("11 follow"));
}

TEST(MessagesTest, APeerProbeNamesAnAddressAndItsAnswerCarriesTheLink) {
  const PeerProbe ask = decode_peer_probe(joined(encode(PeerProbe{200, "10.0.0.7:7070"})));
  EXPECT_EQ(ask.budget_ms, 200u);
  EXPECT_EQ(ask.address, "10.0.0.7:7070");
  std::vector<uint8_t> bytes = joined(encode(PeerProbe{200, "x:1"}));
  store_le<uint32_t>(bytes.data(), kMaxPeerProbeMs + 1);
  EXPECT_THAT(decode_error_text<PeerProbe>(bytes), HasSubstr("budget_ms"));
  bytes = joined(encode(PeerProbe{200, "x:1"}));
  bytes[bytes.size() - 2] = ' ';  // "x 1": no spaces in an address
  EXPECT_THAT(decode_error_text<PeerProbe>(bytes), HasSubstr("address"));

  const PeerLink link = decode_peer_link(joined(encode(PeerLink{true, 8e-4, 1.2e8, 1.1e8, ""})));
  EXPECT_TRUE(link.reached);
  EXPECT_EQ(link.rtt_seconds, 8e-4);
  EXPECT_EQ(link.to_peer_bytes_per_s, 1.2e8);
  EXPECT_EQ(link.from_peer_bytes_per_s, 1.1e8);
  const PeerLink refused = decode_peer_link(joined(encode(PeerLink{false, 0, 0, 0, "refused"})));
  EXPECT_FALSE(refused.reached);
  EXPECT_EQ(refused.why, "refused");
  bytes = joined(encode(PeerLink{true, 8e-4, 1.2e8, 1.1e8, ""}));
  const double negative = -1;
  std::memcpy(bytes.data() + 1, &negative, sizeof negative);
  EXPECT_THAT(decode_error_text<PeerLink>(bytes), HasSubstr("rtt_seconds"));
}

// STATE: a list of operations on slots' recurrent states; a hostile one (no operations, too
// many, an unknown kind, a negative slot, a position past any batch's) is refused by name.
TEST(MessagesTest, AStateCarriesItsOperationsAndRefusesHostileOnes) {
  const State m{{{StateOpKind::SAVE, 0, 16},
                 {StateOpKind::RESTORE, 3, 40},
                 {StateOpKind::HOLD, 1, 0},
                 {StateOpKind::RETURN, 1, 0}}};
  EXPECT_EQ(decode_state(joined(encode(m))).ops, m.ops);
  const std::vector<uint8_t> good = joined(encode(State{{{StateOpKind::RESTORE, 2, 7}}}));
  std::vector<uint8_t> bytes = good;
  store_le<uint32_t>(bytes.data(), 0);
  bytes.resize(4);
  EXPECT_THAT(decode_error_text<State>(bytes), HasSubstr("no operations"));
  bytes = good;
  store_le<uint32_t>(bytes.data(), kMaxStateOps + 1);
  EXPECT_THAT(decode_error_text<State>(bytes), HasSubstr("exceeds the maximum"));
  bytes = good;
  store_le<uint32_t>(bytes.data(), 2);  // two declared, one follows
  EXPECT_THAT(decode_error_text<State>(bytes), HasSubstr("'n'"));
  bytes = good;
  bytes[4] = 4;  // no such operation
  EXPECT_THAT(decode_error_text<State>(bytes), HasSubstr("unknown operation 4"));
  bytes = good;
  store_le<int32_t>(bytes.data() + 5, -1);
  EXPECT_THAT(decode_error_text<State>(bytes), HasSubstr("negative slot"));
  bytes = good;
  store_le<uint64_t>(bytes.data() + 9, uint64_t{1} << 40);
  EXPECT_THAT(decode_error_text<State>(bytes), HasSubstr("'pos'"));
  bytes = good;
  bytes.push_back(0);
  EXPECT_NE(decode_error_text<State>(bytes), "");
}

TEST(MessagesTest, EveryTruncationOfEveryFrameIsAnError) {
  for (const std::vector<uint8_t>& frame : testing::sample_frames()) {
    EXPECT_NO_THROW(decode_frame(frame, FrameLimits{}));
    for (size_t n = 0; n < frame.size(); ++n) {
      EXPECT_THROW(decode_frame(ConstBytes(frame.data(), n), FrameLimits{}), Error) << n;
    }
    // Truncated payloads given straight to the payload decoder fail too.
    ConstBytes payload = ConstBytes(frame).subspan(kFrameHeaderSize);
    auto type = static_cast<MessageType>(load_le<uint16_t>(frame.data() + kFrameOffsetType));
    for (size_t n = 0; n < payload.size(); ++n) {
      EXPECT_THROW(decode_message(type, payload.first(n)), Error)
          << message_type_name(type) << " " << n;
    }
  }
}

TEST(MessagesTest, FrameLengthMustMatchThePayload) {
  std::vector<uint8_t> frame = testing::frame_bytes(Ping{5});
  frame.push_back(0);
  EXPECT_THROW(decode_frame(frame, FrameLimits{}), Error);
}

}  // namespace
}  // namespace herd::net
