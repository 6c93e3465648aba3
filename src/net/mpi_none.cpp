// The MPI transport in a build without MPI (CMake found no MPI C library): asking for it says
// so, with what to install.
#include "net/mpi_transport.h"
#include "util/error.h"

namespace herd::net {

struct MpiTransport::Impl {};

MpiTransport::MpiTransport(MpiTransportOptions) {
  throw Error("net",
              "this herd was built without MPI, so --transport mpi is not available (install "
              "Open MPI: libopenmpi-dev openmpi-bin on Debian, open-mpi with Homebrew, as "
              "scripts/install-deps does; then configure and build again)");
}

MpiTransport::~MpiTransport() = default;

int MpiTransport::rank() const {
  return 0;
}

int MpiTransport::size() const {
  return 1;
}

bool MpiTransport::finished(int) const {
  return false;
}

std::shared_ptr<Connection> MpiTransport::connect(const std::string&, Millis) {
  return nullptr;
}

std::shared_ptr<Connection> MpiTransport::accept(Millis) {
  return nullptr;
}

}  // namespace herd::net
