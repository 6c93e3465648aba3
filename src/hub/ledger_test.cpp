#include "hub/ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include "hub/pod_records.h"
#include "hub/test_postgres.h"
#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::ThrowsMessage;

// Every case runs on both backends: a SQLite file in the test's temporary directory, and
// a database on a PostgreSQL server this test program starts (test_postgres.h), once per
// suite. Without PostgreSQL's binaries, or built without libpq, its cases fail saying so.
struct SqliteBackend {
  static constexpr const char* kName = "Sqlite";
  static std::string fresh(const std::string& name) {
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) / ("herd_ledger_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::filesystem::path path = dir / (name + ".db");
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
    return path.string();
  }
  static void stop() {}
};

struct PostgresBackend {
  static constexpr const char* kName = "Postgres";
  static std::string fresh(const std::string& name) {
    if (!server()) server() = std::make_unique<TestPostgres>();
    return server()->create_database(name);
  }
  static void stop() { server().reset(); }
  static std::unique_ptr<TestPostgres>& server() {
    static std::unique_ptr<TestPostgres> server;
    return server;
  }
};

template <class Backend>
class LedgerTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { Backend::stop(); }
  static std::string fresh(const std::string& name) { return Backend::fresh(name); }
};

struct BackendName {
  template <class Backend>
  static std::string GetName(int) {
    return Backend::kName;
  }
};
using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;
TYPED_TEST_SUITE(LedgerTest, Backends, BackendName);

// A client granted 1000, paying 90 to a pod and 10 to the hub per request.
struct Accounts {
  explicit Accounts(const std::string& spec) : db(open_database(spec)), ledger(*db) {
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
  std::unique_ptr<Database> db;
  Ledger ledger;
};

TYPED_TEST(LedgerTest, TransfersMoveCreditsAndTheHistoryShowsThem) {
  Accounts a(this->fresh("moves"));
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

TYPED_TEST(LedgerTest, ARetriedTransferIsAppliedOnce) {
  Accounts a(this->fresh("retry"));
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

TYPED_TEST(LedgerTest, NoBalanceGoesBelowZeroAndARefusedTransferLeavesNothing) {
  Accounts a(this->fresh("overdraw"));
  const Entry grant[] = {{"issuer", -150}, {"alice", 150}};
  a.ledger.transfer("grant-1", grant);
  EXPECT_TRUE(a.pay("req-1"));
  // 100 more from 50: the pod's 90 would come first in the entries, then alice fails.
  const Entry over[] = {{"pod-1", 90}, {"fee", 10}, {"alice", -100}};
  EXPECT_THAT(
      [&] { a.ledger.transfer("req-2", over); },
      ThrowsMessage<InsufficientFunds>(HasSubstr("account 'alice' has 50, too little for 100")));
  EXPECT_EQ(a.ledger.balance("alice"), 50);
  EXPECT_EQ(a.ledger.balance("pod-1"), 90);
  EXPECT_EQ(a.ledger.history("pod-1").size(), 1u);
  // Nothing of it was kept: the key is free for the transfer that fits.
  EXPECT_TRUE(a.pay("req-2", 45, 5));
  EXPECT_EQ(a.ledger.balance("alice"), 0);
  EXPECT_THAT(a.ledger.verify(), IsEmpty());
}

TYPED_TEST(LedgerTest, BadTransfersAreRefusedNamingTheProblem) {
  Accounts a(this->fresh("bad"));
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
TYPED_TEST(LedgerTest, AHubKilledMidTransferRestartsConsistent) {
  const std::string path = this->fresh("killed");
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

// Two hubs over one database apply the same transfers at once, as when a client's retries
// reach both replicas: each transfer is applied exactly once, by one of them, and those
// the client cannot afford are refused whole, by both.
TYPED_TEST(LedgerTest, TwoHubsApplyingTheSameTransfersApplyEachOnce) {
  constexpr int kTransfers = 120;
  constexpr int kAffordable = 80;  // at 100 a request
  const std::string spec = this->fresh("race");
  {
    Accounts setup(spec);
    const Entry grant[] = {{"issuer", -100 * kAffordable}, {"alice", 100 * kAffordable}};
    setup.ledger.transfer("grant", grant);
  }
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::pair<pid_t, int>> hubs;  // pid, the read end of its outcomes
  for (int h = 0; h < 2; ++h) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(go[1]);
      ::close(out[0]);
      std::string outcomes;  // per transfer: A applied now, B applied before, R refused
      try {
        Accounts a(spec);
        char byte;
        if (::read(go[0], &byte, 1) != 0) ::_exit(4);  // both start when the parent closes it
        for (int i = 0; i < kTransfers; ++i) {
          try {
            outcomes += a.pay("req-" + std::to_string(i)) ? 'A' : 'B';
          } catch (const Error& e) {
            if (std::string_view(e.what()).find("too little") == std::string_view::npos) throw;
            outcomes += 'R';
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "hub %d: %s\n", h, e.what());
        ::_exit(2);
      }
      const bool sent = ::write(out[1], outcomes.data(), outcomes.size()) ==
                        static_cast<ssize_t>(outcomes.size());
      ::_exit(sent ? 0 : 3);
    }
    ::close(out[1]);
    hubs.emplace_back(child, out[0]);
  }
  ::close(go[0]);
  ::close(go[1]);
  std::vector<std::string> outcomes;
  for (const auto& [pid, fd] : hubs) {
    std::string got;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) got.append(buffer, n);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    ASSERT_EQ(got.size(), static_cast<size_t>(kTransfers));
    outcomes.push_back(got);
  }
  int applied = 0;
  for (int i = 0; i < kTransfers; ++i) {
    const std::string both = {outcomes[0][i], outcomes[1][i]};
    EXPECT_TRUE(both == "AB" || both == "BA" || both == "RR") << "req-" << i << ": " << both;
    applied += both.find('A') != std::string::npos;
  }
  EXPECT_EQ(applied, kAffordable);
  Accounts after(spec);
  EXPECT_THAT(after.ledger.verify(), IsEmpty());
  EXPECT_EQ(after.ledger.balance("alice"), 0);
  EXPECT_EQ(after.ledger.balance("pod-1"), 90 * kAffordable);
  EXPECT_EQ(after.ledger.balance("fee"), 10 * kAffordable);
  EXPECT_EQ(after.ledger.history("alice").size(), static_cast<size_t>(kAffordable + 1));
  EXPECT_EQ(after.ledger.history("pod-1").back().balance_after, 90 * kAffordable);
}

TYPED_TEST(LedgerTest, AccountsListsEveryBalance) {
  Accounts a(this->fresh("audit"));
  const Entry grant[] = {{"issuer", -1000}, {"alice", 1000}};
  a.ledger.transfer("grant-1", grant);
  EXPECT_TRUE(a.pay("req-1"));
  const std::vector<AccountBalance> all = a.ledger.accounts();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].name, "alice");
  EXPECT_EQ(all[0].kind, AccountKind::CLIENT);
  EXPECT_EQ(all[0].balance, 900);
  EXPECT_EQ(all[2].name, "issuer");
  EXPECT_EQ(all[2].kind, AccountKind::ISSUER);
  EXPECT_EQ(all[2].balance, -1000);
}

// The database under the ledger: $n parameters (one used twice), rows as text and
// integers, and CHECK and UNIQUE violations told apart from other errors.
TYPED_TEST(LedgerTest, TheDatabaseRunsParametersAndTellsConstraintsApart) {
  const std::unique_ptr<Database> db = open_database(this->fresh("database"));
  db->exec("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL CHECK (n >= 0))");
  EXPECT_EQ(db->run("INSERT INTO t(k, n) VALUES ($1, $2)", {"a", int64_t{5}}).changed, 1);
  const Result twice = db->run("SELECT k, n + $1, $1 FROM t WHERE n < $1", {int64_t{7}});
  ASSERT_EQ(twice.rows.size(), 1u);
  EXPECT_EQ(twice.rows[0].text(0), "a");
  EXPECT_EQ(twice.rows[0].integer(1), 12);
  const auto violation = [&](const std::vector<Param>& params) {
    try {
      db->run("INSERT INTO t(k, n) VALUES ($1, $2)", params);
    } catch (const ConstraintViolation& e) {
      return e.kind();
    }
    return Constraint::OTHER;
  };
  EXPECT_EQ(violation({"a", int64_t{1}}), Constraint::UNIQUE);
  EXPECT_EQ(violation({"b", int64_t{-1}}), Constraint::CHECK);
  EXPECT_THAT([&] { db->run("SELECT nothing FROM nowhere"); },
              ThrowsMessage<Error>(HasSubstr(std::string(db->dialect().name) + ":")));
  {
    Transaction tx(*db);
    db->run("UPDATE t SET n = 9");
  }  // rolled back
  EXPECT_EQ(db->run("SELECT n FROM t").rows[0].integer(0), 5);
}

// pod_records (pod_records.h): a pod's counts survive the hub (a new connection reads
// them) and two replicas adding at once, each on its own connection, lose nothing.
TYPED_TEST(LedgerTest, PodRecordsSurviveARestartAndReplicasAddingAtOnce) {
  const std::string spec = this->fresh("pod_records");
  {
    const std::unique_ptr<Database> db = open_database(spec);
    PodRecords records(*db);
    EXPECT_EQ(records.load("pod-a"), std::nullopt);
    PodCounts failed;
    failed.checked = 1;
    failed.failed = 1;
    failed.last_failure = "request r-1: 5 of 5 tokens implausible";
    records.add("pod-a", failed);
    PodCounts served;
    served.requests = 2;
    served.tokens = 17;
    records.add("pod-a", served);  // no failure: the stored one stays
  }
  const std::unique_ptr<Database> a = open_database(spec), b = open_database(spec);
  PodRecords replica_a(*a), replica_b(*b);
  const std::optional<PodCounts> kept = replica_a.load("pod-a");
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->requests, 2);
  EXPECT_EQ(kept->tokens, 17);
  EXPECT_EQ(kept->failed, 1);
  EXPECT_EQ(kept->last_failure, "request r-1: 5 of 5 tokens implausible");
  PodCounts pass;
  pass.checked = 1;
  pass.passed = 1;
  pass.qualified_passes = 1;
  pass.overruled = 1;
  auto count = [&pass](PodRecords& records) {
    for (int i = 0; i < 50; ++i) records.add("pod-b", pass);
  };
  std::thread first([&] { count(replica_a); });
  count(replica_b);
  first.join();
  const std::optional<PodCounts> both = replica_b.load("pod-b");
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->checked, 100);
  EXPECT_EQ(both->passed, 100);
  EXPECT_EQ(both->qualified_passes, 100);
  EXPECT_EQ(both->overruled, 100);
  EXPECT_EQ(both->failed, 0);
  EXPECT_EQ(replica_a.load("pod-b"), both);
  EXPECT_THAT([&] { replica_a.add("", pass); }, ThrowsMessage<Error>(HasSubstr("pod id")));
}

TEST(DatabaseTest, AnUnreachablePostgresqlIsAnErrorWithoutThePassword) {
  EXPECT_THAT([] { open_database("postgresql://hub:secret@/herd?host=/nonexistent-herd"); },
              ThrowsMessage<Error>(
                  AllOf(HasSubstr("[hub] "), HasSubstr("postgresql"), Not(HasSubstr("secret")))));
}

}  // namespace
}  // namespace herd::hub
