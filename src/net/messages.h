// Payloads of the frame types (byte diagrams in docs/protocol.md) and their encoders and
// bounded decoders. Decoders check every length, count and string against what remains
// and against the maxima below before allocating, and fail with
// herd::Error("[net] <TYPE>: field '<name>': <problem>").
//
// Bulk data (weights, activations, collective chunks) is never copied by the codecs: an
// encoded Payload carries it as a separate `tail` span, sent after the fields with a
// gather write, and a decoded message's `data` views the received frame's payload.
// Lifetime: a decoded message that has a `data` span is valid while its Frame lives.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/batch.h"
#include "net/frame.h"

namespace herd::net {

inline constexpr uint32_t kMaxNodeNameBytes = 128;
inline constexpr uint32_t kMaxTensorNameBytes = 256;
inline constexpr uint32_t kMaxPathBytes = 4096;
inline constexpr uint32_t kMaxRepoIdBytes = 256;  // "org/repo" of a Hugging Face repository
inline constexpr uint32_t kMaxErrorTextBytes = 4096;
inline constexpr uint32_t kMaxDetailsJsonBytes = 32 << 10;
inline constexpr uint32_t kMaxPlanJsonBytes = 16 << 20;
inline constexpr uint32_t kMaxBatchTokens = 1 << 16;
inline constexpr uint32_t kMaxActivationRows = 1 << 20;
inline constexpr uint32_t kMaxActivationCols = 1 << 24;
inline constexpr uint32_t kMaxChainStages = 4096;  // stage times a FORWARD or RESULT carries

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;
inline constexpr size_t kKxPublicBytes = 32;        // X25519 public key
inline constexpr size_t kHelloIdBytes = 32;         // Ed25519 public key (net/identity.h)
inline constexpr size_t kHelloSignatureBytes = 64;  // Ed25519 signature
using KxPublic = std::array<uint8_t, kKxPublicBytes>;

// One encoded payload: `head` holds the fields, `tail` the bulk data that follows them
// unchanged (a view of the caller's buffer: keep it alive until the frame is sent), and
// `trailer` any fields after the bulk data (FORWARD's and RESULT's stage times).
struct Payload {
  std::vector<uint8_t> head;
  ConstBytes tail;
  std::vector<uint8_t> trailer{};
  uint64_t size() const { return head.size() + tail.size() + trailer.size(); }
};

// ---------------------------------------------------------------------------------------
// HELLO: the handshake (see auth.h for the sequence).
enum class AuthMode : uint8_t { NONE = 0, HMAC_SHA256 = 1 };
// What frames after the handshake are: both ends must say the same.
enum class FrameEncryption : uint8_t { PLAINTEXT = 0, XCHACHA20_POLY1305 = 1 };

struct Hello {
  static constexpr MessageType kType = MessageType::HELLO;
  uint16_t protocol_version = kProtocolVersion;
  AuthMode auth = AuthMode::NONE;  // what the sender requires of its peer
  std::string node_name;           // 1..kMaxNodeNameBytes printable ASCII
  Nonce nonce{};
  std::optional<Proof> proof;
  FrameEncryption encryption = FrameEncryption::XCHACHA20_POLY1305;
  KxPublic kx_public{};  // the sender's ephemeral X25519 key for this connection
  std::array<uint8_t, kHelloIdBytes> node_id{};  // the sender's identity (Ed25519 public)
  std::optional<std::array<uint8_t, kHelloSignatureBytes>> signature{};  // of the transcript
};

// PROFILE: what a node offers, measured at start-up.
struct Profile {
  static constexpr MessageType kType = MessageType::PROFILE;
  std::string node_name;
  uint32_t cores = 0;
  uint64_t total_memory = 0;    // bytes
  uint64_t free_memory = 0;     // bytes
  double memory_bandwidth = 0;  // GB/s
  double matmul_gflops = 0;
  std::string details_json;  // further fields as a JSON object; may be empty
};

// 128-bit content hash (XXH3-128) of a model, so a node can tell whether its cached copy
// is the same model without reading it twice.
struct ContentHash {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const ContentHash&) const = default;
};

// The model's name in the coordinator's store, which a node may look up in its own store
// (src/store/store.h) before asking for tensors. A name is never trusted alone: the copy
// found is mapped only when its content hash is LOAD's model_hash.
struct StoreName {
  std::string repo;   // "org/repo"; empty when the coordinator opened a path
  std::string file;   // the (first) file's path in the repository, else the file's base name
  uint64_t size = 0;  // that file's bytes
  bool operator==(const StoreName&) const = default;
};
// Whether LOAD may carry `name`: repo empty or printable (<= kMaxRepoIdBytes), file a
// relative path of printable ASCII (<= kMaxPathBytes) with no empty, "." or ".." component
// and no backslash, so a node's store lookup cannot leave its folders.
bool valid_store_name(const StoreName& name);

// LOAD: the node's part of the Plan.
struct Load {
  static constexpr MessageType kType = MessageType::LOAD;
  std::string plan_json;  // the node's shard of the Plan, as JSON
  ContentHash model_hash;
  std::string model_path_hint;  // where the node may find the file locally; may be empty
  // Absent: the layout before store names (what older coordinators send).
  std::optional<StoreName> store_name{};
};

// WEIGHTS: one chunk of one tensor's bytes, [offset, offset + data.size()) of total_size.
struct Weights {
  static constexpr MessageType kType = MessageType::WEIGHTS;
  std::string tensor_name;  // GGUF name, e.g. "blk.3.attn_q.weight"
  uint64_t offset = 0;
  uint64_t total_size = 0;
  uint64_t chunk_hash = 0;  // chunk_hash(data); the decoder verifies it
  ConstBytes data;          // at most kMaxWeightsChunkBytes
};

// XXH3-64 of a WEIGHTS chunk.
uint64_t chunk_hash(ConstBytes data);

// The fields of a WEIGHTS payload, without the data that follows them: what a transport
// reads first when it may write the data straight into a file (see WeightsSink).
struct WeightsHead {
  std::string tensor_name;
  uint64_t offset = 0;
  uint64_t total_size = 0;
  uint64_t chunk_hash = 0;
  uint64_t n_bytes = 0;  // of data, after the fields
};
// Bytes of the fields before the data: u32 name length | name | 4 x u64.
inline constexpr uint64_t weights_head_bytes(uint64_t name_bytes) {
  return 4 + name_bytes + 32;
}

struct Ready {
  static constexpr MessageType kType = MessageType::READY;
};

// Activations or logits between stages and the chunks of an all-reduce: F32, F16 (IEEE
// half) or Q8_0 (ggml's block_q8_0: each run of 32 values as an f16 scale d and 32 int8 q,
// value = d * q, 34 bytes; a row's last block padded with zeros). net/activations.h codes them.
enum class WireDType : uint8_t { F32 = 0, F16 = 1, Q8_0 = 2 };
inline constexpr uint64_t kQ8Block = 32;       // values per Q8_0 block
inline constexpr uint64_t kQ8BlockBytes = 34;  // bytes per Q8_0 block
// Bytes of a row of `values` values in `dtype` (Q8_0: whole blocks).
uint64_t wire_row_bytes(uint64_t values, WireDType dtype);
// Bytes per value on average, for cost models (Q8_0: 34 / 32).
double wire_bytes_per_value(WireDType dtype);
std::string_view wire_dtype_name(WireDType dtype);

struct Activations {
  WireDType dtype = WireDType::F32;
  uint32_t rows = 0;
  uint32_t cols = 0;
  ConstBytes data;  // rows * wire_row_bytes(cols, dtype) bytes
};

// Optional block of FORWARD and RESULT after the activations' data (docs/protocol.md "Stage
// times"): the compute time of each stage the batch went through since the coordinator
// sent it, when stages pass it straight to each other. Its presence is this bit of the
// activations' dtype byte, so a payload cut before it never passes for one without it.
// Absent (empty) on a batch straight from the coordinator: the version-1 layout unchanged.
inline constexpr uint8_t kStageTimesFlag = 0x80;

// FORWARD: one batch for a stage. `activations` are the previous stage's output, one row
// per token ([n_tokens, n_embd]); a first stage (which embeds the tokens) gets rows = 0.
struct Forward {
  static constexpr MessageType kType = MessageType::FORWARD;
  engine::Batch batch;
  Activations activations;
  std::vector<uint64_t> upstream_ns{};  // at most kMaxChainStages
};

enum class ResultKind : uint8_t { HIDDEN = 0, LOGITS = 1 };

// RESULT: a stage's output for the FORWARD with the same frame id: hidden states
// [n_tokens, n_embd] from a middle stage, or logits [n_logits, n_vocab] from the last.
struct Result {
  static constexpr MessageType kType = MessageType::RESULT;
  ResultKind kind = ResultKind::HIDDEN;
  Activations output;
  uint64_t compute_ns = 0;  // the stage's time in the forward pass (for per-stage figures)
  // The compute time of each stage before the sender that the batch passed through
  // directly (stage to stage), in order; empty when the coordinator sent it the batch.
  std::vector<uint64_t> upstream_ns{};  // at most kMaxChainStages
};

// COLLECTIVE: one chunk of one step of a collective (ring all-reduce): values for the
// elements from `offset` of the reduced vector, coded as one row of `dtype` (the receiver
// knows how many values the step carries and checks the bytes against it).
struct Collective {
  static constexpr MessageType kType = MessageType::COLLECTIVE;
  uint64_t op_id = 0;
  uint32_t step = 0;
  uint64_t offset = 0;  // in elements (Q8_0: a multiple of 32)
  ConstBytes data;      // whole f32 / f16 values or Q8_0 blocks
  WireDType dtype = WireDType::F32;
};

struct Ping {
  static constexpr MessageType kType = MessageType::PING;
  uint64_t timestamp_ns = 0;  // sender's steady clock
};

struct Pong {
  static constexpr MessageType kType = MessageType::PONG;
  uint64_t timestamp_ns = 0;  // copied from the PING
};

enum class ErrorCode : uint32_t {
  PROTOCOL = 1,       // malformed or unexpected frame
  AUTH_FAILED = 2,    // wrong or missing HMAC proof
  AUTH_REQUIRED = 3,  // this node requires a cluster key
  VERSION = 4,        // protocol version mismatch
  BUSY = 5,
  LOAD_FAILED = 6,
  FORWARD_FAILED = 7,
  INTERNAL = 8,
};
// "auth failed", ...; "error N" for codes this build does not know.
std::string error_code_name(ErrorCode code);

// ERROR: the peer could not do what a frame asked; `message` is for humans.
struct ErrorReply {
  static constexpr MessageType kType = MessageType::ERROR;
  ErrorCode code = ErrorCode::INTERNAL;
  std::string message;  // at most kMaxErrorTextBytes; may contain any bytes
};

struct Bye {
  static constexpr MessageType kType = MessageType::BYE;
};

// WANT: the node's answer to a LOAD when it has neither the model file nor a cached copy
// of its tensors: the coordinator then ships them (WEIGHTS), and the node answers READY.
struct Want {
  static constexpr MessageType kType = MessageType::WANT;
};

// RING: the first frame on a connection between two ranks of a tensor-parallel stage (the
// links of its ring all-reduce), or on a stage link (rank 0 of a stage to a rank of the
// next: then the plan's flow token and the calling stage): who is calling, for which plan.
struct Ring {
  static constexpr MessageType kType = MessageType::RING;
  uint64_t token = 0;  // the plan's ring token, from the LOAD both ranks were given
  uint32_t rank = 0;   // the calling rank
};

// PROBE: measures a link (cluster/link_probe.h). The receiver answers a PROBE with a PROBE
// of `reply_bytes` bytes of data (and reply_bytes 0); the data a PROBE carries is there to
// be timed, and is ignored.
inline constexpr uint32_t kMaxProbeBytes = 16 << 20;
struct Probe {
  static constexpr MessageType kType = MessageType::PROBE;
  uint32_t reply_bytes = 0;  // at most kMaxProbeBytes
  ConstBytes data;           // at most kMaxProbeBytes
};

// PEER_PROBE: the coordinator asks a node to measure its link to another node (dial it,
// then PROBE it as cluster/link_probe.h does, within `budget_ms`); the node answers with
// PEER_LINK. Stage links and rings run between nodes, whose links the coordinator's own
// probes cannot see (two Macs on Thunderbolt, the coordinator on Wi-Fi).
inline constexpr uint32_t kMaxPeerProbeMs = 10000;
inline constexpr uint32_t kMaxAddressBytes = 256;
struct PeerProbe {
  static constexpr MessageType kType = MessageType::PEER_PROBE;
  uint32_t budget_ms = 0;  // at most kMaxPeerProbeMs
  std::string address;     // host:port of the other node, as the coordinator reached it
};

// PEER_LINK: the answer to PEER_PROBE. Not reached: `why` says so, the figures are 0.
struct PeerLink {
  static constexpr MessageType kType = MessageType::PEER_LINK;
  bool reached = false;
  double rtt_seconds = 0;
  double to_peer_bytes_per_s = 0;    // from the node that measured to the other
  double from_peer_bytes_per_s = 0;  // back
  std::string why;                   // at most kMaxErrorTextBytes
};

// STATE: operations on the recurrent states (linear attention, compressed caches) of slots
// of a node's loaded part (engine/recurrent_states.h), done in order between forward passes:
// keep a snapshot at a position, restore the latest at or below one, hold a copy before a
// batch that checks a draft, return to it. The node answers with a STATE of the same
// operations, each `pos` then its outcome: a restore's the position restored (0: none), the
// others' as asked. Slots are checked against the part by the node.
enum class StateOpKind : uint8_t { SAVE = 0, RESTORE = 1, HOLD = 2, RETURN = 3 };
inline constexpr uint32_t kMaxStateOps = 1024;
inline constexpr int64_t kMaxStatePosition = INT32_MAX;  // positions are a batch's i32
struct StateOp {
  StateOpKind kind = StateOpKind::SAVE;
  int32_t seq = 0;  // >= 0
  int64_t pos = 0;  // SAVE: positions absorbed; RESTORE: at most; 0..kMaxStatePosition
  bool operator==(const StateOp&) const = default;
};
struct State {
  static constexpr MessageType kType = MessageType::STATE;
  std::vector<StateOp> ops;  // 1..kMaxStateOps
};

using Message =
    std::variant<Hello, Profile, Load, Weights, Ready, Forward, Result, Collective, Ping, Pong,
                 ErrorReply, Bye, Want, Ring, Probe, PeerProbe, PeerLink, State>;

// ---------------------------------------------------------------------------------------
// Encoders. REQUIRES: the message is valid (names non-empty and printable, sizes within the
// maxima, data sizes matching shapes); a violation is a bug and fails HERD_CHECK.
Payload encode(const Hello& m);
Payload encode(const Profile& m);
Payload encode(const Load& m);
Payload encode(const Weights& m);
Payload encode(const Ready& m);
Payload encode(const Forward& m);
Payload encode(const Result& m);
Payload encode(const Collective& m);
Payload encode(const Ping& m);
Payload encode(const Pong& m);
Payload encode(const ErrorReply& m);
Payload encode(const Bye& m);
Payload encode(const Want& m);
Payload encode(const Ring& m);
Payload encode(const Probe& m);
Payload encode(const PeerProbe& m);
Payload encode(const PeerLink& m);
Payload encode(const State& m);

// Decoders: throw herd::Error naming the message and field on any malformed payload,
// including trailing bytes.
Hello decode_hello(ConstBytes payload);
Profile decode_profile(ConstBytes payload);
Load decode_load(ConstBytes payload);
Weights decode_weights(ConstBytes payload);
// The fields alone (`fields` holds nothing after them; the data is elsewhere). Checks them
// as decode_weights does; the chunk hash is left to whoever has the data.
WeightsHead decode_weights_head(ConstBytes fields);
Ready decode_ready(ConstBytes payload);
Forward decode_forward(ConstBytes payload);
Result decode_result(ConstBytes payload);
Collective decode_collective(ConstBytes payload);
Ping decode_ping(ConstBytes payload);
Pong decode_pong(ConstBytes payload);
ErrorReply decode_error(ConstBytes payload);
Bye decode_bye(ConstBytes payload);
Want decode_want(ConstBytes payload);
Ring decode_ring(ConstBytes payload);
Probe decode_probe(ConstBytes payload);
PeerProbe decode_peer_probe(ConstBytes payload);
PeerLink decode_peer_link(ConstBytes payload);
State decode_state(ConstBytes payload);

Message decode_message(MessageType type, ConstBytes payload);

// A whole frame held in one buffer (header then exactly `length` payload bytes), as the
// fuzz target and tests see it: decode_header with `limits`, then decode_message.
Message decode_frame(ConstBytes frame, const FrameLimits& limits);

// The decoder for a message type as a template: decode_as<Weights>(payload).
template <typename M>
M decode_as(ConstBytes payload) {
  if constexpr (std::is_same_v<M, Hello>) return decode_hello(payload);
  if constexpr (std::is_same_v<M, Profile>) return decode_profile(payload);
  if constexpr (std::is_same_v<M, Load>) return decode_load(payload);
  if constexpr (std::is_same_v<M, Weights>) return decode_weights(payload);
  if constexpr (std::is_same_v<M, Ready>) return decode_ready(payload);
  if constexpr (std::is_same_v<M, Forward>) return decode_forward(payload);
  if constexpr (std::is_same_v<M, Result>) return decode_result(payload);
  if constexpr (std::is_same_v<M, Collective>) return decode_collective(payload);
  if constexpr (std::is_same_v<M, Ping>) return decode_ping(payload);
  if constexpr (std::is_same_v<M, Pong>) return decode_pong(payload);
  if constexpr (std::is_same_v<M, ErrorReply>) return decode_error(payload);
  if constexpr (std::is_same_v<M, Bye>) return decode_bye(payload);
  if constexpr (std::is_same_v<M, Want>) return decode_want(payload);
  if constexpr (std::is_same_v<M, Ring>) return decode_ring(payload);
  if constexpr (std::is_same_v<M, Probe>) return decode_probe(payload);
  if constexpr (std::is_same_v<M, PeerProbe>) return decode_peer_probe(payload);
  if constexpr (std::is_same_v<M, PeerLink>) return decode_peer_link(payload);
  if constexpr (std::is_same_v<M, State>) return decode_state(payload);
}

// Replaces control bytes and non-ASCII bytes by '?' so text from a peer is safe in logs.
std::string printable(std::string_view text);

}  // namespace herd::net
