#include "http/connection_table.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace herd::http {
namespace {

// A socket pair whose first end the table holds: eviction shows as end-of-file on the other.
struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~Pair() {
    close(fd[0]);
    close(fd[1]);
  }
  bool shut_down() const {
    char byte;
    return recv(fd[1], &byte, 1, MSG_DONTWAIT) == 0;
  }
};

TEST(ConnectionTable, EvictsTheOldestHalfOpenOfTheAddressFirst) {
  ConnectionTable table({.max_connections = 10, .max_per_address = 2});
  Pair p[4];
  ConnectionTable::Entry a{p[0].fd[0], "10.0.0.1"}, b{p[1].fd[0], "10.0.0.1"},
      other{p[2].fd[0], "10.0.0.2"}, newcomer{p[3].fd[0], "10.0.0.1"};
  ASSERT_TRUE(table.admit(other));
  ASSERT_TRUE(table.admit(a));
  ASSERT_TRUE(table.admit(b));
  ASSERT_TRUE(table.admit(newcomer));  // a (oldest of its address) goes, not `other`
  EXPECT_TRUE(p[0].shut_down());
  EXPECT_FALSE(p[1].shut_down());
  EXPECT_FALSE(p[2].shut_down());
  EXPECT_EQ(table.open_from("10.0.0.1"), 2);
  EXPECT_EQ(table.counts().evicted, 1);
  table.remove(a);  // the evicted one's thread ends: no second count-out
  EXPECT_EQ(table.open_from("10.0.0.1"), 2);
  EXPECT_EQ(table.counts().open, 3);
}

TEST(ConnectionTable, RefusesWhenNoneCanBeEvicted) {
  ConnectionTable table({.max_connections = 2, .max_per_address = 2});
  Pair p[3];
  ConnectionTable::Entry a{p[0].fd[0], "10.0.0.1"}, b{p[1].fd[0], "10.0.0.2"},
      c{p[2].fd[0], "10.0.0.3"};
  ASSERT_TRUE(table.admit(a));
  ASSERT_TRUE(table.admit(b));
  table.set_evictable(a, false);  // both in their handlers
  table.set_evictable(b, false);
  EXPECT_FALSE(table.admit(c));
  EXPECT_EQ(table.counts().refused, 1);
  table.set_evictable(b, true);  // b waits for its next request: at the total cap, anyone's
  EXPECT_TRUE(table.admit(c));
  EXPECT_TRUE(p[1].shut_down());
  EXPECT_FALSE(p[0].shut_down());
  table.remove(a);
  table.remove(b);
  table.remove(c);
  EXPECT_EQ(table.counts().open, 0);
  EXPECT_EQ(table.open_from("10.0.0.1"), 0);
}

}  // namespace
}  // namespace herd::http
