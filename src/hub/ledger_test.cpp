#include "hub/ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

std::string fresh_db(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("herd_ledger_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  return path.string();
}

// A client granted 1000, paying 90 to a pod and 10 to the hub per request.
struct Accounts {
  explicit Accounts(const std::string& path) : db(path), ledger(db) {
    ledger.open_account("issuer", AccountKind::ISSUER);
    ledger.open_account("alice", AccountKind::CLIENT);
    ledger.open_account("pod-1", AccountKind::POD);
    ledger.open_account("fee", AccountKind::FEE);
  }
  bool pay(const std::string& key, int64_t pod_share = 90, int64_t fee_share = 10) {
    const Entry entries[] = {
        {"alice", -(pod_share + fee_share)}, {"pod-1", pod_share}, {"fee", fee_share}};
    return ledger.transfer(key, entries, "request " + key);
  }
  SqliteDb db;
  Ledger ledger;
};

TEST(LedgerTest, TransfersMoveCreditsAndTheHistoryShowsThem) {
  Accounts a(fresh_db("moves.db"));
  const Entry grant[] = {{"issuer", -1000}, {"alice", 1000}};
  EXPECT_TRUE(a.ledger.transfer("grant-1", grant, "welcome"));
  EXPECT_TRUE(a.pay("req-1"));
  EXPECT_TRUE(a.pay("req-2", 45, 5));
  EXPECT_EQ(a.ledger.balance("alice"), 850);
  EXPECT_EQ(a.ledger.balance("pod-1"), 135);
  EXPECT_EQ(a.ledger.balance("fee"), 15);
  EXPECT_EQ(a.ledger.balance("issuer"), -1000);
  const std::vector<HistoryRow> h = a.ledger.history("alice");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].transfer, "grant-1");
  EXPECT_EQ(h[0].memo, "welcome");
  EXPECT_EQ(h[1].amount, -100);
  EXPECT_EQ(h[1].balance_after, 900);
  EXPECT_EQ(h[2].balance_after, 850);
  EXPECT_LT(h[1].entry_id, h[2].entry_id);
  EXPECT_THAT(a.ledger.verify(), IsEmpty());
}

TEST(LedgerTest, ARetriedTransferIsAppliedOnce) {
  Accounts a(fresh_db("retry.db"));
  const Entry grant[] = {{"issuer", -1000}, {"alice", 1000}};
  a.ledger.transfer("grant-1", grant);
  EXPECT_TRUE(a.pay("req-1"));
  EXPECT_FALSE(a.pay("req-1"));  // the same request again: not charged twice
  EXPECT_EQ(a.ledger.balance("alice"), 900);
  EXPECT_THAT([&] { a.pay("req-1", 80, 20); },
              ThrowsMessage<Error>(HasSubstr("transfer key 'req-1' was used before")));
  EXPECT_EQ(a.ledger.balance("pod-1"), 90);
  EXPECT_THAT(a.ledger.verify(), IsEmpty());
}

TEST(LedgerTest, NoBalanceGoesBelowZeroAndARefusedTransferLeavesNothing) {
  Accounts a(fresh_db("overdraw.db"));
  const Entry grant[] = {{"issuer", -150}, {"alice", 150}};
  a.ledger.transfer("grant-1", grant);
  EXPECT_TRUE(a.pay("req-1"));
  // 100 more from 50: the pod's 90 would come first in the entries, then alice fails.
  const Entry over[] = {{"pod-1", 90}, {"fee", 10}, {"alice", -100}};
  EXPECT_THAT([&] { a.ledger.transfer("req-2", over); },
              ThrowsMessage<Error>(HasSubstr("account 'alice' has 50, too little for 100")));
  EXPECT_EQ(a.ledger.balance("alice"), 50);
  EXPECT_EQ(a.ledger.balance("pod-1"), 90);
  EXPECT_EQ(a.ledger.history("pod-1").size(), 1u);
  // Nothing of it was kept: the key is free for the transfer that fits.
  EXPECT_TRUE(a.pay("req-2", 45, 5));
  EXPECT_EQ(a.ledger.balance("alice"), 0);
  EXPECT_THAT(a.ledger.verify(), IsEmpty());
}

TEST(LedgerTest, BadTransfersAreRefusedNamingTheProblem) {
  Accounts a(fresh_db("bad.db"));
  const auto refused = [&](std::vector<Entry> entries, const std::string& needle) {
    EXPECT_THAT([&] { a.ledger.transfer("t", entries); }, ThrowsMessage<Error>(HasSubstr(needle)));
  };
  refused({{"issuer", -5}, {"alice", 4}}, "entries sum to -1, not zero");
  refused({{"issuer", 0}}, "1 entries");
  refused({{"issuer", -5}, {"alice", 5}, {"pod-1", 0}}, "a zero entry for 'pod-1'");
  refused({{"issuer", -5}, {"bob", 5}}, "no account 'bob'");
  refused({{"issuer", INT64_MAX}, {"alice", INT64_MAX}, {"fee", 2}}, "overflow");
  refused({{"issuer", -5}, {std::string(300, 'x'), 5}}, "must be 1-200 bytes");
  EXPECT_THAT([&] { a.ledger.open_account("alice", AccountKind::POD); },
              ThrowsMessage<Error>(HasSubstr("exists as a client account, not pod")));
  a.ledger.open_account("alice", AccountKind::CLIENT);  // again, as it is: nothing happens
  EXPECT_THAT(a.ledger.history("issuer"), IsEmpty());
  EXPECT_THAT(a.ledger.verify(), IsEmpty());
}

// A hub killed with -9 in the middle of transfers: the ledger it finds on restart is
// consistent (every transfer whole or absent, all entries summing to zero, balances equal
// to their entries), and every transfer it had finished is there.
TEST(LedgerTest, AHubKilledMidTransferRestartsConsistent) {
  const std::string path = fresh_db("killed.db");
  {
    Accounts setup(path);
    const Entry grant[] = {{"issuer", -1'000'000'000}, {"alice", 1'000'000'000}};
    setup.ledger.transfer("grant", grant);
  }
  std::mt19937 rng(3);
  int64_t finished_before = 0;
  for (int round = 0; round < 5; ++round) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      Accounts a(path);
      for (int i = 0;; ++i) {
        a.pay("round-" + std::to_string(round) + "-" + std::to_string(i), 7, 3);
        // Tell the parent each finished transfer (one byte each).
        if (::write(pipe_fds[1], "x", 1) != 1) ::_exit(3);
      }
    }
    ::close(pipe_fds[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 200));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status));
    int64_t finished = 0;
    char buffer[4096];
    for (ssize_t got; (got = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) finished += got;
    ::close(pipe_fds[0]);

    Accounts after(path);
    EXPECT_THAT(after.ledger.verify(), IsEmpty()) << "round " << round;
    // Each finished transfer is there (the one in flight may be there too, or not).
    const int64_t paid = after.ledger.balance("fee") / 3;
    EXPECT_GE(paid, finished_before + finished) << "round " << round;
    EXPECT_LE(paid, finished_before + finished + 1) << "round " << round;
    EXPECT_EQ(after.ledger.balance("pod-1"), 7 * paid);
    EXPECT_EQ(after.ledger.balance("alice"), 1'000'000'000 - 10 * paid);
    finished_before = paid;
    EXPECT_GT(finished, 0) << "the child made no transfer in round " << round;
  }
}

}  // namespace
}  // namespace herd::hub
