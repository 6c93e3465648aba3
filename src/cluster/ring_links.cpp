#include "cluster/ring_links.h"

#include "util/error.h"

namespace herd::cluster {

RingAllReduce::RingAllReduce(int rank, int size, std::shared_ptr<net::Connection> next,
                             std::shared_ptr<net::Connection> prev, net::RingOptions options)
    : next_(std::move(next)), prev_(std::move(prev)), ring_(rank, size, next_, prev_, options) {}

namespace {

std::shared_ptr<net::Connection> link(net::Transport& transport, const Assignment& a,
                                      const RingLink& spec, int neighbour,
                                      const AcceptRingLink& accept, net::Millis timeout) {
  if (spec.connect.empty()) return accept(static_cast<uint32_t>(neighbour), timeout);
  std::shared_ptr<net::Connection> c = transport.connect(spec.connect, timeout);
  net::send_message(*c, 0, net::Ring{a.ring.token, static_cast<uint32_t>(a.rank)});
  return c;
}

}  // namespace

std::unique_ptr<RingAllReduce> join_ring(net::Transport& transport, const Assignment& a,
                                         const AcceptRingLink& accept, net::Millis timeout) {
  HERD_CHECK(a.n_ranks > 1);
  const int next_rank = (a.rank + 1) % a.n_ranks;
  const int prev_rank = (a.rank + a.n_ranks - 1) % a.n_ranks;
  try {
    std::shared_ptr<net::Connection> next =
        link(transport, a, a.ring.next, next_rank, accept, timeout);
    std::shared_ptr<net::Connection> prev =
        a.n_ranks == 2 ? next : link(transport, a, a.ring.prev, prev_rank, accept, timeout);
    net::RingOptions options;
    options.dtype = a.wire_dtype;  // the all-reduces travel as the hidden states do
    return std::make_unique<RingAllReduce>(a.rank, a.n_ranks, std::move(next), std::move(prev),
                                           options);
  } catch (const Error& e) {
    throw Error("cluster", "rank " + std::to_string(a.rank) + " of stage " +
                               std::to_string(a.stage) + " could not join its ring: " + e.what());
  }
}

}  // namespace herd::cluster
