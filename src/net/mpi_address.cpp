// "rank:N", the address of an MPI rank (mpi_transport.h); built with or without MPI, so that
// a bad address is reported the same way in both.
#include <charconv>

#include "net/mpi_transport.h"
#include "util/error.h"

namespace herd::net {

int parse_rank_address(const std::string& address) {
  constexpr std::string_view kPrefix = "rank:";
  int rank = -1;
  if (address.size() > kPrefix.size() && address.compare(0, kPrefix.size(), kPrefix) == 0) {
    const char* begin = address.data() + kPrefix.size();
    const char* end = address.data() + address.size();
    const auto [at, ec] = std::from_chars(begin, end, rank);
    if (ec != std::errc() || at != end) rank = -1;
  }
  if (rank < 0) throw Error("net", "mpi: '" + address + "' is not a rank address (rank:N)");
  return rank;
}

}  // namespace herd::net
