#include "util/open_files.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace herd {
namespace {

bool listed(const std::vector<int>& fds, int fd) {
  return std::find(fds.begin(), fds.end(), fd) != fds.end();
}

TEST(OpenFiles, ListsASocketWhileItIsOpen) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  std::vector<int> fds = open_file_descriptors();
  EXPECT_TRUE(listed(fds, pair[0]));
  EXPECT_TRUE(listed(fds, pair[1]));
  EXPECT_TRUE(listed(fds, 2));  // stderr
  EXPECT_TRUE(std::is_sorted(fds.begin(), fds.end()));
  close(pair[0]);
  close(pair[1]);
  fds = open_file_descriptors();
  // The numbers may be reused by the listing itself, but not both at once.
  EXPECT_FALSE(listed(fds, pair[0]) && listed(fds, pair[1]));
}

}  // namespace
}  // namespace herd
