// Ring all-reduce over Connections (the collective a tensor-parallel stage runs after
// attention and after the FFN). A small vector goes round the ring whole (p - 1 steps; each
// rank then sums the p vectors in rank order). A large one: the vector is cut into p segments
// (segment i = elements [i*n/p, (i+1)*n/p), so uneven n is fine); then
//   reduce-scatter: p-1 steps; in step s rank r sends segment (r-s) mod p to the next
//                   rank and adds the segment (r-s-1) mod p it receives from the previous;
//                   afterwards rank r holds the full sum of segment (r+1) mod p;
//   all-gather:     p-1 steps passing the finished segments around the ring.
// Each rank sends and receives about 2n(p-1)/p values: bandwidth-optimal, independent of p.
// Segments travel as COLLECTIVE frames of at most max_chunk_bytes; sends and receives
// alternate chunk by chunk, so no rank ever has more than one chunk in flight per link and
// the transport's bounded queues cannot deadlock.
#pragma once

#include <memory>
#include <vector>

#include "net/transport.h"

namespace herd::net {

struct RingOptions {
  Millis timeout{30000};                     // for each receive
  size_t max_chunk_bytes = size_t{4} << 20;  // per COLLECTIVE frame
  // Vectors up to this size go round whole (p - 1 steps, latency-bound: decode), larger
  // ones by reduce-scatter + all-gather (2(p - 1) steps, bandwidth-optimal: prefill).
  size_t small_bytes = size_t{64} << 10;
};

class RingCollectives final : public Collectives {
 public:
  // `next` reaches rank (rank+1) % size, `prev` rank (rank-1+size) % size; with two ranks
  // they may be the same connection. With one rank both may be null.
  // REQUIRES: while a collective runs, these connections carry only this ring's frames.
  RingCollectives(int rank, int size, std::shared_ptr<Connection> next,
                  std::shared_ptr<Connection> prev, RingOptions options = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Throws herd::Error naming the peer when a neighbour fails, times out or sends a chunk
  // other than the expected one (wrong operation, step, offset or size).
  void all_reduce_sum(float* data, size_t n) override;

 private:
  enum class Combine { ADD, COPY };
  // One step: send elements [send_begin, +send_count) to next while receiving
  // [recv_begin, +recv_count) from prev, combining as `combine`.
  void exchange(float* data, uint32_t step, size_t send_begin, size_t send_count, size_t recv_begin,
                size_t recv_count, Combine combine);
  void receive_chunk(float* data, uint32_t step, size_t begin, size_t count, Combine combine);
  void all_gather_sum(float* data, size_t n);

  const int rank_;
  const int size_;
  std::shared_ptr<Connection> next_;
  std::shared_ptr<Connection> prev_;
  const RingOptions options_;
  uint64_t op_id_ = 0;           // counts collectives; every rank runs them in the same order
  std::vector<float> gathered_;  // all_gather_sum's [size][n]
};

}  // namespace herd::net
