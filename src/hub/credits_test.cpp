// Credits over one PostgreSQL shared by hub replicas (docs/network.md, "Replicas"): what
// each replica does at start (grants) and every period (settle) is safe with two at once.
#include "hub/credits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hub/test_postgres.h"
#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::IsEmpty;

std::unique_ptr<TestPostgres>& server_holder() {
  static std::unique_ptr<TestPostgres> server;
  return server;
}

TestPostgres& server() {
  if (!server_holder()) server_holder() = std::make_unique<TestPostgres>();
  return *server_holder();
}

class CreditsTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { server_holder().reset(); }
};

// One replica: its own connection, ledger and credits.
struct Replica {
  explicit Replica(const std::string& uri)
      : db(open_database(uri)), ledger(*db), credits(ledger, Prices{}) {}
  std::unique_ptr<Database> db;
  Ledger ledger;
  Credits credits;
};

const Charge kRequest{100, 90, 10};  // a client pays 100: 90 to the pod, 10 to the fee

// The other replica moves 60 of a pod's 100 pending while this one settles it: this one
// read 100, its transfer waits on the row the other holds, then is refused whole (it would
// overdraw); it reads the balance again and pays the 40 left. Nothing is paid twice.
TEST_F(CreditsTest, ASettleRacingAnotherReplicaPaysWhatIsLeft) {
  const std::string uri = server().create_database("settle_race");
  Replica mine(uri);
  mine.credits.grant("client:a", 1000);
  mine.credits.open_pod("p");
  ASSERT_TRUE(mine.credits.charge("r1", "client:a", "p", {100, 100, 0}, "a request"));
  ASSERT_EQ(mine.credits.balance("pod:p:pending"), 100);

  // The other replica's transfer of 60, by hand, held open: it locks both rows.
  const std::unique_ptr<Database> other = open_database(uri);
  other->begin();
  other->run("INSERT INTO transfers(key, entries, memo, at_ms) VALUES ($1, $2, 'other', 0)",
             {std::string("verified:other"), std::string("pod:p 60\npod:p:pending -60\n")});
  other->run("UPDATE accounts SET balance = balance - 60 WHERE name = 'pod:p:pending'");
  other->run("INSERT INTO entries(transfer, account, amount) VALUES ($1, 'pod:p:pending', -60)",
             {std::string("verified:other")});
  other->run("UPDATE accounts SET balance = balance + 60 WHERE name = 'pod:p'");
  other->run("INSERT INTO entries(transfer, account, amount) VALUES ($1, 'pod:p', 60)",
             {std::string("verified:other")});

  int64_t paid = -1;
  std::string error;
  std::thread settling([&] {
    try {
      paid = mine.credits.settle({"p"}, "mine-1");
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  // Until this replica's UPDATE waits for the other's row lock.
  const std::unique_ptr<Database> watch = open_database(uri);
  bool waiting = false;
  for (int i = 0; i < 500 && !waiting; ++i) {
    waiting = watch->run("SELECT count(*) FROM pg_locks WHERE NOT granted").rows[0].integer(0) > 0;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(waiting) << "the settle never waited for the other replica's lock";
  other->commit();
  settling.join();

  EXPECT_EQ(error, "");
  EXPECT_EQ(paid, 40);
  EXPECT_EQ(mine.credits.balance("pod:p:pending"), 0);
  EXPECT_EQ(mine.credits.balance("pod:p"), 100);
  EXPECT_THAT(mine.credits.verify(), IsEmpty());
  // A check that passes after the other replica moved everything moves nothing, quietly.
  mine.credits.verified("r1", "p", 90);
  EXPECT_EQ(mine.credits.balance("pod:p"), 100);
}

// Two replica processes start at once on one database (grants, the same key), then charge
// their own requests to the same pods and settle them every round, as two hubs with short
// periods: nothing throws, every credit a pod earned is paid once (what both say they paid
// is what the pods' accounts hold), and the ledger is consistent.
TEST_F(CreditsTest, TwoReplicasChargingAndSettlingAtOnceNeverFailOrPayTwice) {
  constexpr int kPods = 8, kRounds = 25;
  const std::string uri = server().create_database("settle_two");
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::pair<pid_t, int>> replicas;  // pid, the read end of what it paid
  for (int r = 0; r < 2; ++r) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(go[1]);
      ::close(out[0]);
      int64_t paid = 0;
      try {
        char byte;
        if (::read(go[0], &byte, 1) != 0) ::_exit(4);  // both start when the parent closes it
        Replica replica(uri);
        replica.credits.grant("client:a", 1'000'000);
        std::vector<std::string> pods;
        for (int p = 0; p < kPods; ++p) {
          pods.push_back("p" + std::to_string(p));
          replica.credits.open_pod(pods.back());
        }
        for (int round = 0; round < kRounds; ++round) {
          for (const std::string& pod : pods) {
            const std::string id = std::to_string(r) + "-" + std::to_string(round) + "-" + pod;
            if (!replica.credits.charge(id, "client:a", pod, kRequest, "a request")) ::_exit(5);
          }
          paid += replica.credits.settle(pods, std::to_string(r) + "-" + std::to_string(round));
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "replica %d: %s\n", r, e.what());
        ::_exit(2);
      }
      const std::string text = std::to_string(paid);
      ::_exit(::write(out[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0
                                                                                             : 3);
    }
    ::close(out[1]);
    replicas.emplace_back(child, out[0]);
  }
  ::close(go[0]);
  ::close(go[1]);
  int64_t paid = 0;
  for (const auto& [pid, fd] : replicas) {
    std::string got;
    char buffer[64];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) got.append(buffer, n);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    paid += got.empty() ? 0 : std::stoll(got);
  }
  Replica after(uri);
  EXPECT_THAT(after.credits.verify(), IsEmpty());
  EXPECT_EQ(after.credits.balance("client:a"),
            1'000'000 - 2 * kRounds * kPods * kRequest.client_pays);
  int64_t pods_hold = 0, pending = 0;
  for (int p = 0; p < kPods; ++p) {
    pods_hold += after.credits.balance("pod:p" + std::to_string(p));
    pending += after.credits.balance("pod:p" + std::to_string(p) + ":pending");
  }
  EXPECT_EQ(pods_hold, paid);
  EXPECT_EQ(pods_hold + pending, 2 * kRounds * kPods * kRequest.pod_earns);
  EXPECT_EQ(after.ledger.history("client:a").front().amount, 1'000'000);  // granted once
  EXPECT_EQ(after.ledger.history("client:a").size(), 1u + 2 * kRounds * kPods);
}

}  // namespace
}  // namespace herd::hub
