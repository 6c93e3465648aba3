#include "net/ring.h"

#include <algorithm>
#include <cstring>

#include "net/activations.h"
#include "util/error.h"

namespace herd::net {

RingCollectives::RingCollectives(int rank, int size, std::shared_ptr<Connection> next,
                                 std::shared_ptr<Connection> prev, RingOptions options)
    : rank_(rank),
      size_(size),
      next_(std::move(next)),
      prev_(std::move(prev)),
      options_(options),
      unit_(options.dtype == WireDType::F32 ? 1 : kQ8Block) {
  HERD_CHECK_MSG(size >= 1 && rank >= 0 && rank < size,
                 "rank=" + std::to_string(rank) + " size=" + std::to_string(size));
  HERD_CHECK(size == 1 || (next_ && prev_));
  HERD_CHECK(options_.max_chunk_bytes >= wire_row_bytes(unit_, options_.dtype));
}

void RingCollectives::all_reduce_sum(float* data, size_t n) {
  ++op_id_;
  if (size_ == 1) return;
  const size_t p = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  if (wire_offset(n) <= options_.small_bytes) return all_gather_sum(data, n);
  // Segment i is [begin(i), begin(i + 1)), cut at multiples of unit_ (uneven n is fine);
  // n * p fits in 64 bits for any real vector.
  const size_t units = (n + unit_ - 1) / unit_;
  auto begin = [&](size_t i) { return std::min(n, units * i / p * unit_); };
  auto segment = [&](size_t i) { return Range{begin(i), begin(i + 1) - begin(i)}; };
  uint32_t number = 0;
  for (size_t s = 0; s + 1 < p; ++s, ++number) {
    exchange(Step{Phase::REDUCE, number, data}, segment((r + p - s) % p),
             segment((r + p - s - 1) % p));
  }
  // Rank r now holds the sum of segment (r + 1) % p. In wire form f32 is `data` itself;
  // other dtypes code the finished segment once, and every rank decodes the same bytes.
  uint8_t* wire = reinterpret_cast<uint8_t*>(data);
  if (options_.dtype != WireDType::F32) {
    wire_.resize(wire_offset(n));
    wire = wire_.data();
    const Range own = segment((r + 1) % p);
    encode_row({data + own.begin, own.count}, options_.dtype, wire + wire_offset(own.begin));
  }
  for (size_t s = 0; s + 1 < p; ++s, ++number) {
    exchange(Step{Phase::GATHER, number, nullptr, wire, wire}, segment((r + 1 + p - s) % p),
             segment((r + p - s) % p));
  }
  if (options_.dtype != WireDType::F32) {
    decode_row(wire, options_.dtype, {data, n}, DecodeInto::COPY);
  }
}

// Small vectors (a decode step's activations): latency, not bandwidth, is the cost, so the
// whole vectors go round the ring in p - 1 steps (half the steps of reduce-scatter +
// all-gather), coded once by their rank, and every rank adds them up in rank order from
// the same bytes: the same bits on every rank.
void RingCollectives::all_gather_sum(float* data, size_t n) {
  const size_t p = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  const uint64_t row = wire_offset(n);
  wire_.resize(p * row);  // [p][row]: rank i's vector coded at i * row
  encode_row({data, n}, options_.dtype, wire_.data() + r * row);
  for (size_t s = 0; s + 1 < p; ++s) {
    const size_t send = (r + p - s) % p;
    const size_t recv = (r + p - s - 1) % p;
    exchange(Step{Phase::GATHER, static_cast<uint32_t>(s), nullptr, wire_.data() + send * row,
                  wire_.data() + recv * row},
             Range{0, n}, Range{0, n});
  }
  decode_row(wire_.data(), options_.dtype, {data, n}, DecodeInto::COPY);
  for (size_t i = 1; i < p; ++i) {
    decode_row(wire_.data() + i * row, options_.dtype, {data, n}, DecodeInto::ADD);
  }
}

void RingCollectives::exchange(const Step& step, Range send, Range recv) {
  // Chunks of whole units (a q8_0 chunk is whole blocks, so it starts on one).
  const uint64_t unit_bytes = wire_row_bytes(unit_, options_.dtype);
  const size_t chunk = options_.max_chunk_bytes / unit_bytes * unit_;
  // At least one frame each way, even for an empty segment, so steps stay in lockstep.
  const size_t n_send = send.count == 0 ? 1 : (send.count + chunk - 1) / chunk;
  const size_t n_recv = recv.count == 0 ? 1 : (recv.count + chunk - 1) / chunk;
  auto piece = [&](Range whole, size_t i) {
    const size_t offset = whole.begin + i * chunk;  // <= the range's end
    return Range{offset, std::min(chunk, whole.begin + whole.count - offset)};
  };
  for (size_t i = 0; i < std::max(n_send, n_recv); ++i) {
    if (i < n_send) send_chunk(step, piece(send, i));
    if (i < n_recv) receive_chunk(step, piece(recv, i));
  }
}

void RingCollectives::send_chunk(const Step& step, Range chunk) {
  const uint64_t bytes = wire_row_bytes(chunk.count, options_.dtype);
  const uint8_t* coded;
  if (step.phase == Phase::GATHER) {
    coded = step.send_wire + wire_offset(chunk.begin);
  } else if (options_.dtype == WireDType::F32) {
    coded = reinterpret_cast<const uint8_t*>(step.data + chunk.begin);
  } else {
    scratch_.resize(bytes);  // sends are synchronous: reused for the next chunk
    encode_row({step.data + chunk.begin, chunk.count}, options_.dtype, scratch_.data());
    coded = scratch_.data();
  }
  Collective message{op_id_, step.number, chunk.begin, ConstBytes(coded, bytes), options_.dtype};
  send_message(*next_, op_id_, message);
}

void RingCollectives::receive_chunk(const Step& step, Range chunk) {
  Frame frame = prev_->recv_frame(options_.timeout);
  Collective got = expect_message<Collective>(frame, prev_->peer_name());
  const uint64_t bytes = wire_row_bytes(chunk.count, options_.dtype);
  if (got.op_id != op_id_ || got.step != step.number || got.offset != chunk.begin ||
      got.dtype != options_.dtype || got.data.size() != bytes) {
    throw Error("net", "all_reduce: peer '" + prev_->peer_name() + "' sent operation " +
                           std::to_string(got.op_id) + " step " + std::to_string(got.step) +
                           " offset " + std::to_string(got.offset) + " with " +
                           std::to_string(got.data.size()) + " bytes of " +
                           std::string(wire_dtype_name(got.dtype)) + "; expected operation " +
                           std::to_string(op_id_) + " step " + std::to_string(step.number) +
                           " offset " + std::to_string(chunk.begin) + " with " +
                           std::to_string(bytes) + " bytes of " +
                           std::string(wire_dtype_name(options_.dtype)));
  }
  if (chunk.count == 0) return;
  if (step.phase == Phase::GATHER) {
    std::memcpy(step.recv_wire + wire_offset(chunk.begin), got.data.data(), bytes);
  } else {
    decode_row(got.data.data(), options_.dtype, {step.data + chunk.begin, chunk.count},
               DecodeInto::ADD);
  }
}

}  // namespace herd::net
