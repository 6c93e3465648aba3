#include "net/ring.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace herd::net {

RingCollectives::RingCollectives(int rank, int size, std::shared_ptr<Connection> next,
                                 std::shared_ptr<Connection> prev, RingOptions options)
    : rank_(rank), size_(size), next_(std::move(next)), prev_(std::move(prev)), options_(options) {
  HERD_CHECK_MSG(size >= 1 && rank >= 0 && rank < size,
                 "rank=" + std::to_string(rank) + " size=" + std::to_string(size));
  HERD_CHECK(size == 1 || (next_ && prev_));
  HERD_CHECK(options_.max_chunk_bytes >= sizeof(float));
}

void RingCollectives::all_reduce_sum(float* data, size_t n) {
  ++op_id_;
  if (size_ == 1) return;
  const size_t p = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  if (n * sizeof(float) <= options_.small_bytes) return all_gather_sum(data, n);
  // Segment i is [begin(i), begin(i + 1)); n * p fits in 64 bits for any real vector.
  auto begin = [&](size_t i) { return n * i / p; };
  auto count = [&](size_t i) { return begin(i + 1) - begin(i); };
  uint32_t step = 0;
  for (size_t s = 0; s + 1 < p; ++s, ++step) {
    size_t send = (r + p - s) % p;
    size_t recv = (r + p - s - 1) % p;
    exchange(data, step, begin(send), count(send), begin(recv), count(recv), Combine::ADD);
  }
  for (size_t s = 0; s + 1 < p; ++s, ++step) {
    size_t send = (r + 1 + p - s) % p;
    size_t recv = (r + p - s) % p;
    exchange(data, step, begin(send), count(send), begin(recv), count(recv), Combine::COPY);
  }
}

// Small vectors (a decode step's activations): latency, not bandwidth, is the cost, so the
// whole vectors go round the ring in p - 1 steps (half the steps of reduce-scatter +
// all-gather) and every rank adds them up in rank order: the same bits on every rank.
void RingCollectives::all_gather_sum(float* data, size_t n) {
  const size_t p = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  gathered_.resize(p * n);  // [p][n]: rank i's vector at i * n
  // copy_n, not memcpy: n may be 0 with null pointers (an empty vector's data()), which
  // memcpy forbids even for 0 bytes.
  std::copy_n(data, n, gathered_.data() + r * n);
  for (size_t s = 0; s + 1 < p; ++s) {
    const size_t send = (r + p - s) % p;
    const size_t recv = (r + p - s - 1) % p;
    exchange(gathered_.data(), static_cast<uint32_t>(s), send * n, n, recv * n, n, Combine::COPY);
  }
  std::copy_n(gathered_.data(), n, data);
  for (size_t i = 1; i < p; ++i) {
    const float* v = gathered_.data() + i * n;
    for (size_t k = 0; k < n; ++k) data[k] += v[k];
  }
}

void RingCollectives::exchange(float* data, uint32_t step, size_t send_begin, size_t send_count,
                               size_t recv_begin, size_t recv_count, Combine combine) {
  const size_t chunk = options_.max_chunk_bytes / sizeof(float);
  // At least one frame each way, even for an empty segment, so steps stay in lockstep.
  size_t n_send = send_count == 0 ? 1 : (send_count + chunk - 1) / chunk;
  size_t n_recv = recv_count == 0 ? 1 : (recv_count + chunk - 1) / chunk;
  for (size_t i = 0; i < std::max(n_send, n_recv); ++i) {
    if (i < n_send) {
      size_t offset = send_begin + i * chunk;  // <= the segment's end
      size_t values = std::min(chunk, send_begin + send_count - offset);
      Collective message{
          op_id_, step, offset,
          ConstBytes(reinterpret_cast<const uint8_t*>(data + offset), values * sizeof(float))};
      send_message(*next_, op_id_, message);
    }
    if (i < n_recv) {
      size_t offset = recv_begin + i * chunk;
      size_t values = std::min(chunk, recv_begin + recv_count - offset);
      receive_chunk(data, step, offset, values, combine);
    }
  }
}

void RingCollectives::receive_chunk(float* data, uint32_t step, size_t begin, size_t count,
                                    Combine combine) {
  Frame frame = prev_->recv_frame(options_.timeout);
  Collective chunk = expect_message<Collective>(frame, prev_->peer_name());
  if (chunk.op_id != op_id_ || chunk.step != step || chunk.offset != begin ||
      chunk.data.size() != count * sizeof(float)) {
    throw Error("net", "all_reduce: peer '" + prev_->peer_name() + "' sent operation " +
                           std::to_string(chunk.op_id) + " step " + std::to_string(chunk.step) +
                           " offset " + std::to_string(chunk.offset) + " with " +
                           std::to_string(chunk.data.size() / sizeof(float)) +
                           " values; expected operation " + std::to_string(op_id_) + " step " +
                           std::to_string(step) + " offset " + std::to_string(begin) + " with " +
                           std::to_string(count));
  }
  if (count == 0) return;
  const uint8_t* bytes = chunk.data.data();
  float* out = data + begin;
  if (combine == Combine::COPY) {
    std::memcpy(out, bytes, count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    float v;
    std::memcpy(&v, bytes + i * sizeof(float), sizeof v);  // the payload may be unaligned
    out[i] += v;
  }
}

}  // namespace herd::net
