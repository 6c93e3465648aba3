#include "net/messages.h"

#include <xxhash.h>

#include <algorithm>

#include "net/wire_io.h"
#include "util/error.h"

namespace herd::net {

uint64_t chunk_hash(ConstBytes data) {
  return XXH3_64bits(data.data(), data.size());
}

uint64_t wire_row_bytes(uint64_t values, WireDType dtype) {
  switch (dtype) {
    case WireDType::F16:
      return values * 2;
    case WireDType::Q8_0:
      return (values + kQ8Block - 1) / kQ8Block * kQ8BlockBytes;
    case WireDType::F32:
      break;
  }
  return values * 4;
}

double wire_bytes_per_value(WireDType dtype) {
  return dtype == WireDType::Q8_0 ? static_cast<double>(kQ8BlockBytes) / kQ8Block
                                  : static_cast<double>(wire_row_bytes(1, dtype));
}

std::string_view wire_dtype_name(WireDType dtype) {
  switch (dtype) {
    case WireDType::F16:
      return "f16";
    case WireDType::Q8_0:
      return "q8_0";
    case WireDType::F32:
      break;
  }
  return "f32";
}

namespace {

WireDType read_wire_dtype(WireReader& r, uint8_t dtype, const char* field) {
  if (dtype > static_cast<uint8_t>(WireDType::Q8_0)) {
    r.fail(field, "unknown activation type " + std::to_string(dtype));
  }
  return static_cast<WireDType>(dtype);
}

}  // namespace

std::string error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::PROTOCOL:
      return "protocol error";
    case ErrorCode::AUTH_FAILED:
      return "authentication failed";
    case ErrorCode::AUTH_REQUIRED:
      return "authentication required";
    case ErrorCode::VERSION:
      return "version mismatch";
    case ErrorCode::BUSY:
      return "busy";
    case ErrorCode::LOAD_FAILED:
      return "load failed";
    case ErrorCode::FORWARD_FAILED:
      return "forward failed";
    case ErrorCode::INTERNAL:
      return "internal error";
  }
  return "error " + std::to_string(static_cast<uint32_t>(code));
}

std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c != '\n' && (c < 0x20 || c > 0x7e)) c = '?';
  }
  return out;
}

namespace {

bool is_printable_name(std::string_view s, size_t max_bytes) {
  if (s.empty() || s.size() > max_bytes) return false;
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Payload fields_only(WireWriter& w) {
  return Payload{w.take(), {}};
}

// ---- activations: u8 dtype | u32 rows | u32 cols | u64 n_bytes | data ----

void write_activations_fields(WireWriter& w, const Activations& a, bool stage_times = false) {
  HERD_CHECK(a.rows <= kMaxActivationRows && a.cols <= kMaxActivationCols);
  HERD_CHECK_MSG(a.data.size() == uint64_t{a.rows} * wire_row_bytes(a.cols, a.dtype),
                 "rows=" + std::to_string(a.rows) + " cols=" + std::to_string(a.cols) +
                     " bytes=" + std::to_string(a.data.size()));
  w.u8(static_cast<uint8_t>(a.dtype) | (stage_times ? kStageTimesFlag : 0));
  w.u32(a.rows);
  w.u32(a.cols);
  w.u64(a.data.size());
}

Activations read_activations(WireReader& r, bool* stage_times = nullptr) {
  Activations a;
  uint8_t dtype = r.u8("dtype");
  if (stage_times != nullptr) {
    *stage_times = (dtype & kStageTimesFlag) != 0;
    dtype = static_cast<uint8_t>(dtype & ~kStageTimesFlag);
  }
  a.dtype = read_wire_dtype(r, dtype, "dtype");
  a.rows = r.u32("rows");
  if (a.rows > kMaxActivationRows) r.fail("rows", std::to_string(a.rows) + " rows is too many");
  a.cols = r.u32("cols");
  if (a.cols > kMaxActivationCols) r.fail("cols", std::to_string(a.cols) + " columns is too many");
  uint64_t n_bytes = r.u64("n_bytes");
  // rows <= 2^20 and cols <= 2^24, so the product fits easily in 64 bits.
  uint64_t expected = uint64_t{a.rows} * wire_row_bytes(a.cols, a.dtype);
  if (n_bytes != expected) {
    r.fail("n_bytes", std::to_string(n_bytes) + " bytes do not match " + std::to_string(a.rows) +
                          " x " + std::to_string(a.cols) + " " +
                          std::string(wire_dtype_name(a.dtype)));
  }
  a.data = r.bytes(n_bytes, "data");
  return a;
}

// ---- stage times: u32 n (1..kMaxChainStages) | n x u64 compute_ns, after the activations'
// data when their dtype byte has kStageTimesFlag ----

void write_stage_times(WireWriter& w, const std::vector<uint64_t>& times) {
  if (times.empty()) return;
  HERD_CHECK(times.size() <= kMaxChainStages);
  w.u32(static_cast<uint32_t>(times.size()));
  for (uint64_t t : times) w.u64(t);
}

std::vector<uint64_t> read_stage_times(WireReader& r, bool present) {
  std::vector<uint64_t> times;
  if (!present) return times;
  const uint32_t n = r.count(kMaxChainStages, 8, "n_stage_times");
  if (n == 0) r.fail("n_stage_times", "an empty list is sent as no flag and no list");
  times.reserve(n);
  for (uint32_t i = 0; i < n; ++i) times.push_back(r.u64("stage_ns"));
  return times;
}

}  // namespace

// ---- HELLO: u16 version | u8 auth | u8 has_proof | nonce[32] | proof[32]? | u8 encryption
//      | kx_public[32] | node_id[32] | u8 has_signature | signature[64]? | string name ----

Payload encode(const Hello& m) {
  HERD_CHECK(is_printable_name(m.node_name, kMaxNodeNameBytes));
  WireWriter w;
  w.u16(m.protocol_version);
  w.u8(static_cast<uint8_t>(m.auth));
  w.u8(m.proof ? 1 : 0);
  w.bytes(m.nonce);
  if (m.proof) w.bytes(*m.proof);
  w.u8(static_cast<uint8_t>(m.encryption));
  w.bytes(m.kx_public);
  w.bytes(m.node_id);
  w.u8(m.signature ? 1 : 0);
  if (m.signature) w.bytes(*m.signature);
  w.string(m.node_name);
  return fields_only(w);
}

Hello decode_hello(ConstBytes payload) {
  WireReader r(payload, "HELLO");
  Hello m;
  m.protocol_version = r.u16("protocol_version");
  uint8_t auth = r.u8("auth");
  if (auth > static_cast<uint8_t>(AuthMode::HMAC_SHA256)) {
    r.fail("auth", "unknown authentication mode " + std::to_string(auth));
  }
  m.auth = static_cast<AuthMode>(auth);
  bool has_proof = r.boolean("has_proof");
  ConstBytes nonce = r.bytes(kNonceBytes, "nonce");
  std::copy(nonce.begin(), nonce.end(), m.nonce.begin());
  if (has_proof) {
    ConstBytes proof = r.bytes(kProofBytes, "proof");
    m.proof.emplace();
    std::copy(proof.begin(), proof.end(), m.proof->begin());
  }
  uint8_t encryption = r.u8("encryption");
  if (encryption > static_cast<uint8_t>(FrameEncryption::XCHACHA20_POLY1305)) {
    r.fail("encryption", "unknown frame encryption " + std::to_string(encryption));
  }
  m.encryption = static_cast<FrameEncryption>(encryption);
  ConstBytes kx = r.bytes(kKxPublicBytes, "kx_public");
  std::copy(kx.begin(), kx.end(), m.kx_public.begin());
  ConstBytes id = r.bytes(kHelloIdBytes, "node_id");
  std::copy(id.begin(), id.end(), m.node_id.begin());
  if (r.boolean("has_signature")) {
    ConstBytes signature = r.bytes(kHelloSignatureBytes, "signature");
    m.signature.emplace();
    std::copy(signature.begin(), signature.end(), m.signature->begin());
  }
  m.node_name = r.name(kMaxNodeNameBytes, "node_name");
  r.expect_end();
  return m;
}

// ---- PROFILE: string name | u32 cores | u64 total | u64 free | f64 bw | f64 gflops | string json

Payload encode(const Profile& m) {
  HERD_CHECK(is_printable_name(m.node_name, kMaxNodeNameBytes));
  HERD_CHECK(m.details_json.size() <= kMaxDetailsJsonBytes);
  WireWriter w;
  w.string(m.node_name);
  w.u32(m.cores);
  w.u64(m.total_memory);
  w.u64(m.free_memory);
  w.f64(m.memory_bandwidth);
  w.f64(m.matmul_gflops);
  w.string(m.details_json);
  return fields_only(w);
}

Profile decode_profile(ConstBytes payload) {
  WireReader r(payload, "PROFILE");
  Profile m;
  m.node_name = r.name(kMaxNodeNameBytes, "node_name");
  m.cores = r.u32("cores");
  m.total_memory = r.u64("total_memory");
  m.free_memory = r.u64("free_memory");
  m.memory_bandwidth = r.f64_measure("memory_bandwidth");
  m.matmul_gflops = r.f64_measure("matmul_gflops");
  m.details_json = r.string(kMaxDetailsJsonBytes, "details_json");
  r.expect_end();
  return m;
}

// ---- LOAD: u64 hash_low | u64 hash_high | string model_path_hint | string plan_json
//      | store name (optional: string repo | string file | u64 size) ----

namespace {

// A repository's file path as the store keeps it: relative, no empty, "." or ".."
// component, no backslash (what hf_listing accepts), printable.
bool is_relative_file_path(std::string_view path) {
  if (!is_printable_name(path, kMaxPathBytes) || path.front() == '/') return false;
  if (path.find('\\') != std::string_view::npos) return false;
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(path.find('/', begin), path.size());
    const std::string_view part = path.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == path.size()) return true;
    begin = end + 1;
  }
}

}  // namespace

bool valid_store_name(const StoreName& name) {
  return (name.repo.empty() || is_printable_name(name.repo, kMaxRepoIdBytes)) &&
         is_relative_file_path(name.file);
}

Payload encode(const Load& m) {
  HERD_CHECK(m.plan_json.size() <= kMaxPlanJsonBytes && m.model_path_hint.size() <= kMaxPathBytes);
  WireWriter w(32 + m.model_path_hint.size() + m.plan_json.size());
  w.u64(m.model_hash.low);
  w.u64(m.model_hash.high);
  w.string(m.model_path_hint);
  w.string(m.plan_json);
  if (m.store_name) {
    const StoreName& n = *m.store_name;
    HERD_CHECK_MSG(valid_store_name(n), n.repo + " " + n.file);
    w.string(n.repo);
    w.string(n.file);
    w.u64(n.size);
  }
  return fields_only(w);
}

Load decode_load(ConstBytes payload) {
  WireReader r(payload, "LOAD");
  Load m;
  m.model_hash.low = r.u64("model_hash");
  m.model_hash.high = r.u64("model_hash");
  m.model_path_hint = r.string(kMaxPathBytes, "model_path_hint");
  m.plan_json = r.string(kMaxPlanJsonBytes, "plan_json");
  if (r.remaining() > 0) {
    StoreName n;
    n.repo = r.string(kMaxRepoIdBytes, "store_repo");
    if (!n.repo.empty() && !is_printable_name(n.repo, kMaxRepoIdBytes)) {
      r.fail("store_repo", "not printable ASCII");
    }
    n.file = r.string(kMaxPathBytes, "store_file");
    if (!is_relative_file_path(n.file)) {
      r.fail("store_file",
             "'" + printable(n.file) + "' is not a relative path within a repository");
    }
    n.size = r.u64("store_size");
    m.store_name = std::move(n);
  }
  r.expect_end();
  return m;
}

// ---- WEIGHTS: string name | u64 offset | u64 total_size | u64 hash | u64 n_bytes | data ----

Payload encode(const Weights& m) {
  HERD_CHECK(is_printable_name(m.tensor_name, kMaxTensorNameBytes));
  HERD_CHECK(m.data.size() <= kMaxWeightsChunkBytes);
  HERD_CHECK(m.offset <= m.total_size && m.data.size() <= m.total_size - m.offset);
  WireWriter w;
  w.string(m.tensor_name);
  w.u64(m.offset);
  w.u64(m.total_size);
  w.u64(m.chunk_hash);
  w.u64(m.data.size());
  return Payload{w.take(), m.data};
}

namespace {

WeightsHead read_weights_head(WireReader& r) {
  WeightsHead h;
  h.tensor_name = r.name(kMaxTensorNameBytes, "tensor_name");
  h.offset = r.u64("offset");
  h.total_size = r.u64("total_size");
  h.chunk_hash = r.u64("chunk_hash");
  h.n_bytes = r.u64("n_bytes");
  if (h.n_bytes > kMaxWeightsChunkBytes) {
    r.fail("n_bytes", "chunk of " + std::to_string(h.n_bytes) + " bytes exceeds the maximum " +
                          std::to_string(kMaxWeightsChunkBytes));
  }
  if (h.offset > h.total_size || h.n_bytes > h.total_size - h.offset) {
    r.fail("offset", "chunk [" + std::to_string(h.offset) + ", +" + std::to_string(h.n_bytes) +
                         ") lies outside the tensor's " + std::to_string(h.total_size) + " bytes");
  }
  return h;
}

}  // namespace

Weights decode_weights(ConstBytes payload) {
  WireReader r(payload, "WEIGHTS");
  WeightsHead h = read_weights_head(r);
  Weights m;
  m.tensor_name = std::move(h.tensor_name);
  m.offset = h.offset;
  m.total_size = h.total_size;
  m.chunk_hash = h.chunk_hash;
  m.data = r.bytes(h.n_bytes, "data");
  r.expect_end();
  if (chunk_hash(m.data) != m.chunk_hash) {
    r.fail("chunk_hash", "tensor '" + m.tensor_name + "' chunk at offset " +
                             std::to_string(m.offset) + " does not match its hash (corrupted)");
  }
  return m;
}

WeightsHead decode_weights_head(ConstBytes fields) {
  WireReader r(fields, "WEIGHTS");
  WeightsHead h = read_weights_head(r);
  r.expect_end();
  return h;
}

// ---- READY, BYE, WANT: empty ----

Payload encode(const Ready&) {
  return {};
}
Payload encode(const Bye&) {
  return {};
}

Ready decode_ready(ConstBytes payload) {
  WireReader(payload, "READY").expect_end();
  return {};
}

Bye decode_bye(ConstBytes payload) {
  WireReader(payload, "BYE").expect_end();
  return {};
}

Payload encode(const Want&) {
  return {};
}

Want decode_want(ConstBytes payload) {
  WireReader(payload, "WANT").expect_end();
  return {};
}

// ---- RING: u64 token | u32 rank ----

Payload encode(const Ring& m) {
  WireWriter w;
  w.u64(m.token);
  w.u32(m.rank);
  return Payload{w.take(), {}};
}

Ring decode_ring(ConstBytes payload) {
  WireReader r(payload, "RING");
  Ring m;
  m.token = r.u64("token");
  m.rank = r.u32("rank");
  r.expect_end();
  return m;
}

// ---- PROBE: u32 reply_bytes | u32 n | n bytes of data ----

Payload encode(const Probe& m) {
  HERD_CHECK(m.reply_bytes <= kMaxProbeBytes && m.data.size() <= kMaxProbeBytes);
  WireWriter w;
  w.u32(m.reply_bytes);
  w.u32(static_cast<uint32_t>(m.data.size()));
  return Payload{w.take(), m.data};
}

Probe decode_probe(ConstBytes payload) {
  WireReader r(payload, "PROBE");
  Probe m;
  m.reply_bytes = r.u32("reply_bytes");
  if (m.reply_bytes > kMaxProbeBytes) {
    throw Error("net", "PROBE: field 'reply_bytes': " + std::to_string(m.reply_bytes) +
                           " is over the limit of " + std::to_string(kMaxProbeBytes));
  }
  const uint32_t n = r.u32("n");
  if (n != payload.size() - 8) {
    throw Error("net", "PROBE: field 'n': " + std::to_string(n) + " bytes of data declared, " +
                           std::to_string(payload.size() - 8) + " follow");
  }
  m.data = payload.subspan(8);
  return m;
}

// ---- PEER_PROBE: u32 budget_ms | string address ----

Payload encode(const PeerProbe& m) {
  HERD_CHECK(m.budget_ms <= kMaxPeerProbeMs && !m.address.empty() &&
             m.address.size() <= kMaxAddressBytes);
  WireWriter w;
  w.u32(m.budget_ms);
  w.string(m.address);
  return fields_only(w);
}

PeerProbe decode_peer_probe(ConstBytes payload) {
  WireReader r(payload, "PEER_PROBE");
  PeerProbe m;
  m.budget_ms = r.u32("budget_ms");
  if (m.budget_ms > kMaxPeerProbeMs) {
    r.fail("budget_ms",
           std::to_string(m.budget_ms) + " is over " + std::to_string(kMaxPeerProbeMs));
  }
  m.address = r.string(kMaxAddressBytes, "address");
  if (m.address.empty()) r.fail("address", "empty");
  for (unsigned char c : m.address) {
    if (c <= ' ' || c >= 0x7f) r.fail("address", "not printable ASCII without spaces");
  }
  r.expect_end();
  return m;
}

// ---- PEER_LINK: u8 reached | f64 rtt | f64 to_peer | f64 from_peer | string why ----

Payload encode(const PeerLink& m) {
  WireWriter w;
  w.u8(m.reached ? 1 : 0);
  w.f64(m.rtt_seconds);
  w.f64(m.to_peer_bytes_per_s);
  w.f64(m.from_peer_bytes_per_s);
  w.string(std::string_view(m.why).substr(0, kMaxErrorTextBytes));
  return fields_only(w);
}

PeerLink decode_peer_link(ConstBytes payload) {
  WireReader r(payload, "PEER_LINK");
  PeerLink m;
  m.reached = r.boolean("reached");
  m.rtt_seconds = r.f64_measure("rtt_seconds");
  m.to_peer_bytes_per_s = r.f64_measure("to_peer_bytes_per_s");
  m.from_peer_bytes_per_s = r.f64_measure("from_peer_bytes_per_s");
  m.why = r.string(kMaxErrorTextBytes, "why");
  r.expect_end();
  return m;
}

// ---- STATE: u32 n | n x {u8 kind, i32 seq, u64 pos} ----

namespace {
constexpr uint64_t kStateOpBytes = 1 + 4 + 8;
}

Payload encode(const State& m) {
  HERD_CHECK(!m.ops.empty() && m.ops.size() <= kMaxStateOps);
  WireWriter w(4 + m.ops.size() * kStateOpBytes);
  w.u32(static_cast<uint32_t>(m.ops.size()));
  for (const StateOp& op : m.ops) {
    HERD_CHECK(op.seq >= 0 && op.pos >= 0 && op.pos <= kMaxStatePosition);
    w.u8(static_cast<uint8_t>(op.kind));
    w.i32(op.seq);
    w.u64(static_cast<uint64_t>(op.pos));
  }
  return fields_only(w);
}

State decode_state(ConstBytes payload) {
  WireReader r(payload, "STATE");
  State m;
  const uint32_t n = r.count(kMaxStateOps, kStateOpBytes, "n");
  if (n == 0) r.fail("n", "no operations");
  m.ops.resize(n);
  for (StateOp& op : m.ops) {
    const uint8_t kind = r.u8("kind");
    if (kind > static_cast<uint8_t>(StateOpKind::RETURN)) {
      r.fail("kind", "unknown operation " + std::to_string(kind));
    }
    op.kind = static_cast<StateOpKind>(kind);
    op.seq = r.i32("seq");
    if (op.seq < 0) r.fail("seq", "negative slot " + std::to_string(op.seq));
    const uint64_t pos = r.u64("pos");
    if (pos > static_cast<uint64_t>(kMaxStatePosition)) {
      r.fail("pos", std::to_string(pos) + " is over " + std::to_string(kMaxStatePosition));
    }
    op.pos = static_cast<int64_t>(pos);
  }
  r.expect_end();
  return m;
}

// ---- FORWARD: u32 n | n x {i32 token, i32 seq, i32 pos, u8 want_logits} | activations
//      | stage times (optional) ----

namespace {
constexpr uint64_t kForwardTokenBytes = 4 + 4 + 4 + 1;
}

Payload encode(const Forward& m) {
  const engine::Batch& b = m.batch;
  size_t n = b.tokens.size();
  HERD_CHECK(n <= kMaxBatchTokens);
  HERD_CHECK(b.seq.size() == n && b.pos.size() == n && b.want_logits.size() == n);
  HERD_CHECK(m.activations.rows == 0 || m.activations.rows == n);
  WireWriter w(4 + n * kForwardTokenBytes + 32 + 8 * m.upstream_ns.size());
  w.u32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    w.i32(b.tokens[i]);
    w.i32(b.seq[i]);
    w.i32(b.pos[i]);
    w.u8(b.want_logits[i] ? 1 : 0);
  }
  write_activations_fields(w, m.activations, !m.upstream_ns.empty());
  // The stage times follow the activations' data, as a trailer of the gather write.
  WireWriter times;
  write_stage_times(times, m.upstream_ns);
  return Payload{w.take(), m.activations.data, times.take()};
}

Forward decode_forward(ConstBytes payload) {
  WireReader r(payload, "FORWARD");
  Forward m;
  uint32_t n = r.count(kMaxBatchTokens, kForwardTokenBytes, "n_tokens");
  engine::Batch& b = m.batch;
  b.tokens.reserve(n);
  b.seq.reserve(n);
  b.pos.reserve(n);
  b.want_logits.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    int32_t token = r.i32("token");
    int32_t seq = r.i32("seq");
    int32_t pos = r.i32("pos");
    bool want = r.boolean("want_logits");
    if (token < 0 || seq < 0 || pos < 0) {
      r.fail("token", "token " + std::to_string(i) + " has a negative id, sequence or position");
    }
    b.add(token, seq, pos, want);
  }
  bool stage_times = false;
  m.activations = read_activations(r, &stage_times);
  if (m.activations.rows != 0 && m.activations.rows != n) {
    r.fail("rows", std::to_string(m.activations.rows) + " activation rows for " +
                       std::to_string(n) + " tokens");
  }
  m.upstream_ns = read_stage_times(r, stage_times);
  r.expect_end();
  return m;
}

// ---- RESULT: u8 kind | u64 compute_ns | activations | stage times (optional) ----

Payload encode(const Result& m) {
  WireWriter w;
  w.u8(static_cast<uint8_t>(m.kind));
  w.u64(m.compute_ns);
  write_activations_fields(w, m.output, !m.upstream_ns.empty());
  WireWriter times;
  write_stage_times(times, m.upstream_ns);
  return Payload{w.take(), m.output.data, times.take()};
}

Result decode_result(ConstBytes payload) {
  WireReader r(payload, "RESULT");
  Result m;
  uint8_t kind = r.u8("kind");
  if (kind > static_cast<uint8_t>(ResultKind::LOGITS)) {
    r.fail("kind", "unknown result kind " + std::to_string(kind));
  }
  m.kind = static_cast<ResultKind>(kind);
  m.compute_ns = r.u64("compute_ns");
  bool stage_times = false;
  m.output = read_activations(r, &stage_times);
  m.upstream_ns = read_stage_times(r, stage_times);
  r.expect_end();
  return m;
}

// ---- COLLECTIVE: u64 op_id | u32 step | u64 offset | u8 dtype | u64 n_bytes | data ----

namespace {

// The unit a COLLECTIVE's data comes in: a value, or a Q8_0 block.
uint64_t collective_unit_bytes(WireDType dtype) {
  return dtype == WireDType::Q8_0 ? kQ8BlockBytes : wire_row_bytes(1, dtype);
}

}  // namespace

Payload encode(const Collective& m) {
  HERD_CHECK(m.data.size() % collective_unit_bytes(m.dtype) == 0);
  WireWriter w;
  w.u64(m.op_id);
  w.u32(m.step);
  w.u64(m.offset);
  w.u8(static_cast<uint8_t>(m.dtype));
  w.u64(m.data.size());
  return Payload{w.take(), m.data};
}

Collective decode_collective(ConstBytes payload) {
  WireReader r(payload, "COLLECTIVE");
  Collective m;
  m.op_id = r.u64("op_id");
  m.step = r.u32("step");
  m.offset = r.u64("offset");
  m.dtype = read_wire_dtype(r, r.u8("dtype"), "dtype");
  uint64_t n_bytes = r.u64("n_bytes");
  if (n_bytes % collective_unit_bytes(m.dtype) != 0) {
    r.fail("n_bytes", std::to_string(n_bytes) + " bytes is not a whole number of " +
                          std::string(wire_dtype_name(m.dtype)) +
                          (m.dtype == WireDType::Q8_0 ? " blocks" : " values"));
  }
  m.data = r.bytes(n_bytes, "data");
  r.expect_end();
  return m;
}

// ---- PING, PONG: u64 timestamp_ns ----

Payload encode(const Ping& m) {
  WireWriter w;
  w.u64(m.timestamp_ns);
  return fields_only(w);
}

Payload encode(const Pong& m) {
  WireWriter w;
  w.u64(m.timestamp_ns);
  return fields_only(w);
}

Ping decode_ping(ConstBytes payload) {
  WireReader r(payload, "PING");
  Ping m{.timestamp_ns = r.u64("timestamp_ns")};
  r.expect_end();
  return m;
}

Pong decode_pong(ConstBytes payload) {
  WireReader r(payload, "PONG");
  Pong m{.timestamp_ns = r.u64("timestamp_ns")};
  r.expect_end();
  return m;
}

// ---- ERROR: u32 code | string message ----

Payload encode(const ErrorReply& m) {
  WireWriter w;
  w.u32(static_cast<uint32_t>(m.code));
  // A long message is cut rather than refused: the error must reach the peer.
  w.string(std::string_view(m.message).substr(0, kMaxErrorTextBytes));
  return fields_only(w);
}

ErrorReply decode_error(ConstBytes payload) {
  WireReader r(payload, "ERROR");
  ErrorReply m;
  m.code = static_cast<ErrorCode>(r.u32("code"));  // unknown codes are kept: newer peers
  m.message = r.string(kMaxErrorTextBytes, "message");
  r.expect_end();
  return m;
}

Message decode_message(MessageType type, ConstBytes payload) {
  switch (type) {
    case MessageType::HELLO:
      return decode_hello(payload);
    case MessageType::PROFILE:
      return decode_profile(payload);
    case MessageType::LOAD:
      return decode_load(payload);
    case MessageType::WEIGHTS:
      return decode_weights(payload);
    case MessageType::READY:
      return decode_ready(payload);
    case MessageType::FORWARD:
      return decode_forward(payload);
    case MessageType::RESULT:
      return decode_result(payload);
    case MessageType::COLLECTIVE:
      return decode_collective(payload);
    case MessageType::PING:
      return decode_ping(payload);
    case MessageType::PONG:
      return decode_pong(payload);
    case MessageType::ERROR:
      return decode_error(payload);
    case MessageType::BYE:
      return decode_bye(payload);
    case MessageType::WANT:
      return decode_want(payload);
    case MessageType::RING:
      return decode_ring(payload);
    case MessageType::PROBE:
      return decode_probe(payload);
    case MessageType::PEER_PROBE:
      return decode_peer_probe(payload);
    case MessageType::PEER_LINK:
      return decode_peer_link(payload);
    case MessageType::STATE:
      return decode_state(payload);
  }
  throw Error("net", "unknown message type " + std::to_string(static_cast<uint16_t>(type)));
}

Message decode_frame(ConstBytes frame, const FrameLimits& limits) {
  FrameHeader header = decode_header(frame, limits);
  uint64_t payload_bytes = frame.size() - kFrameHeaderSize;
  if (header.length != payload_bytes) {
    throw Error("net", "frame: " + std::string(message_type_name(header.type)) + " declares " +
                           std::to_string(header.length) + " payload bytes but " +
                           std::to_string(payload_bytes) + " follow");
  }
  return decode_message(header.type, frame.subspan(kFrameHeaderSize));
}

}  // namespace herd::net
