#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/mpi_transport.h"
#include "util/error.h"

namespace herd::net {
namespace {

TEST(MpiAddress, ParsesRankAddresses) {
  EXPECT_EQ(parse_rank_address("rank:0"), 0);
  EXPECT_EQ(parse_rank_address("rank:17"), 17);
  EXPECT_EQ(MpiTransport::address_of(3), "rank:3");
  EXPECT_EQ(parse_rank_address(MpiTransport::address_of(12)), 12);
}

TEST(MpiAddress, RejectsOtherAddresses) {
  for (const char* bad :
       {"", "rank:", "rank:-1", "rank:1x", "rank: 1", "127.0.0.1:7070", "1", "rank:99999999999"}) {
    try {
      parse_rank_address(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[net] mpi:"), std::string::npos) << e.what();
    }
  }
}

// A build without MPI (mpi_none.cpp) says so when the transport is asked for; a build with
// MPI tests the transport itself under mpirun (mpi_transport_test).
#ifndef HERD_HAVE_MPI
TEST(MpiAddress, ABuildWithoutMpiSaysSo) {
  EXPECT_THAT([] { MpiTransport transport; },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("built without MPI")));
}
#endif

}  // namespace
}  // namespace herd::net
