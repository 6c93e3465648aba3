// The ring all-reduce of a tensor-parallel stage across processes: each rank links to the
// next rank and from the previous one (assignment.h RingSpec says which side dials), and
// the engine's AllReduce runs net::RingCollectives over those links.
#pragma once

#include <functional>
#include <memory>

#include "cluster/assignment.h"
#include "engine/all_reduce.h"
#include "net/ring.h"
#include "net/transport.h"

namespace herd::cluster {

class RingAllReduce final : public engine::AllReduce {
 public:
  RingAllReduce(int rank, int size, std::shared_ptr<net::Connection> next,
                std::shared_ptr<net::Connection> prev, net::RingOptions options = {});
  void sum(float* data, size_t n) override { ring_.all_reduce_sum(data, n); }
  const std::shared_ptr<net::Connection>& next() const { return next_; }
  const std::shared_ptr<net::Connection>& prev() const { return prev_; }

 private:
  std::shared_ptr<net::Connection> next_, prev_;
  net::RingCollectives ring_;
};

// A link the neighbour `from_rank` dialled (its RING frame carried our token), or throws
// herd::Error when none arrives within the timeout.
using AcceptRingLink =
    std::function<std::shared_ptr<net::Connection>(uint32_t from_rank, net::Millis timeout)>;

// Dials or accepts both links of rank a.rank and returns its all-reduce.
// REQUIRES: a.n_ranks > 1.
std::unique_ptr<RingAllReduce> join_ring(net::Transport& transport, const Assignment& a,
                                         const AcceptRingLink& accept, net::Millis timeout);

}  // namespace herd::cluster
