// The MPI Transport: herd under `mpirun`, on clusters that already run MPI. Every process of
// MPI_COMM_WORLD is a rank; rank 0 coordinates, the others serve as nodes (cli/mpi_ranks.cpp).
// A "connection" is a channel between two ranks: connect("rank:N") opens one to rank N, which
// the peer's accept() returns; both then carry herd's frames exactly as TCP does, so the
// coordinator, the node, stage links and the tensor-parallel ring run unchanged.
//
// On the wire (MPI point-to-point on a duplicate of MPI_COMM_WORLD, so nothing else matches
// herd's messages):
//   tag 0                 control: u32 kind (1 CONNECT, 2 FINISH) | u32 channel
//   tag 1 + 2*c + side    one herd frame per MPI message (28-byte header, then the payload)
//                         on channel c; side 0 is what the rank that opened c sends, side 1
//                         what the accepting rank sends, so the channels each rank opens
//                         never collide with those its peers open.
// One receiver thread per process takes every message (MPI_Improbe + MPI_Mrecv, polling with
// a short back-off: a blocking probe would spin a core per rank) and queues it on its
// connection; sends go straight out with MPI_Send on the sending thread. That needs
// MPI_THREAD_MULTIPLE: a library that offers less is a clear error, not a silent
// serialisation.
//
// What MPI changes, by construction:
//   - No HELLO handshake and no key: mpirun started every rank, so they trust each other
//     (MPI's own launch is the authentication). Connections come back with their limits
//     already lifted.
//   - No heartbeat failures: silent_for() is always zero (PINGs are consumed). A rank that
//     dies makes mpirun abort the whole job (MPI's semantics), so the recovery that TCP
//     pods have (re-planning around a lost node) is not available.
// The destructor waits until every rank has reached its own (so no rank still sends to one
// that finalised) and then calls MPI_Finalize.
//
// A build without MPI (CMake found none) gets mpi_none.cpp, whose constructor throws
// "[net] this herd was built without MPI ...".
#pragma once

#include <memory>
#include <string>

#include "net/transport.h"

namespace herd::net {

struct MpiTransportOptions {
  FrameLimits limits;  // what each received frame is checked against
  LogFn log;           // dropped messages and why; may be empty
};

class MpiTransport final : public Transport {
 public:
  // Initialises MPI (MPI_Init_thread, MPI_THREAD_MULTIPLE) and starts the receiver. Throws
  // herd::Error when the build has no MPI or the library cannot give MPI_THREAD_MULTIPLE.
  // REQUIRES: at most one per process, ever (MPI cannot be initialised twice).
  explicit MpiTransport(MpiTransportOptions options = {});
  ~MpiTransport() override;  // waits for every rank to get here, then MPI_Finalize
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const;
  int size() const;
  // "rank:N", the address other ranks connect() to.
  static std::string address_of(int rank) { return "rank:" + std::to_string(rank); }
  // True once `rank` has begun shutting down (its transport is being destroyed): it will
  // accept no more connections, and every connection to it has failed.
  bool finished(int rank) const;

  std::string_view name() const override { return "mpi"; }
  // address: "rank:N", 0 <= N < size(), N != rank(). Never blocks on the peer: the
  // connection exists once the CONNECT message is sent.
  std::shared_ptr<Connection> connect(const std::string& address, Millis timeout) override;
  std::shared_ptr<Connection> accept(Millis timeout) override;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;  // shared with the connections, which may outlive this
};

// The rank N of "rank:N", or throws herd::Error naming the address.
int parse_rank_address(const std::string& address);

}  // namespace herd::net
