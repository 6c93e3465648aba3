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
//
// Values travel in options.dtype (--wire-dtype): f32 exactly; f16 or q8_0 coded per chunk
// (segments and chunks then start at multiples of 32 values, q8_0's block). Partial sums
// are coded at each reduce-scatter step and added up in f32; each finished segment is coded
// once by its owner and passed on as bytes, and every rank (the owner too) decodes the same
// bytes, so all ranks end with the same bits in every dtype.
#pragma once

#include <memory>
#include <vector>

#include "net/messages.h"
#include "net/transport.h"

namespace herd::net {

struct RingOptions {
  Millis timeout{30000};                     // for each receive
  size_t max_chunk_bytes = size_t{4} << 20;  // per COLLECTIVE frame
  // Vectors up to this size go round whole (p - 1 steps, latency-bound: decode), larger
  // ones by reduce-scatter + all-gather (2(p - 1) steps, bandwidth-optimal: prefill).
  // (In wire bytes: n values cost wire_row_bytes(n, dtype).)
  size_t small_bytes = size_t{64} << 10;
  WireDType dtype = WireDType::F32;  // of the values on the wire
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
  // What a step does: REDUCE codes elements of `data` and adds what it receives to them;
  // GATHER passes coded bytes of `wire` (the vector in wire form) on and stores those it
  // receives.
  enum class Phase { REDUCE, GATHER };
  struct Range {
    size_t begin = 0;  // in elements
    size_t count = 0;
  };
  // One step: send `send` to next while receiving `recv` from prev, chunk by chunk. GATHER
  // reads the sent elements from `send_wire` and stores the received ones in `recv_wire`
  // (element e at byte wire_offset(e)); REDUCE works on `data`.
  struct Step {
    Phase phase;
    uint32_t number;
    float* data = nullptr;
    const uint8_t* send_wire = nullptr;
    uint8_t* recv_wire = nullptr;
  };
  void exchange(const Step& step, Range send, Range recv);
  void send_chunk(const Step& step, Range chunk);
  void receive_chunk(const Step& step, Range chunk);
  void all_gather_sum(float* data, size_t n);
  uint64_t wire_offset(size_t element) const { return wire_row_bytes(element, options_.dtype); }

  const int rank_;
  const int size_;
  std::shared_ptr<Connection> next_;
  std::shared_ptr<Connection> prev_;
  const RingOptions options_;
  const size_t unit_;             // segments and chunks start at multiples of it: 32 unless f32
  uint64_t op_id_ = 0;            // counts collectives; every rank runs them in the same order
  std::vector<uint8_t> wire_;     // the vector in wire form (all_gather_sum: [size][n] of it)
  std::vector<uint8_t> scratch_;  // one chunk coded for sending
};

}  // namespace herd::net
