#include "hub/ledger.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace herd::hub {
namespace {

constexpr size_t kMaxNameBytes = 200;
constexpr size_t kMaxMemoBytes = 1000;
constexpr size_t kMaxEntries = 64;

// The balance CHECK is the database's: a transfer that would overdraw fails inside the
// transaction and nothing of it stays.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS accounts (
  name    TEXT PRIMARY KEY,
  kind    TEXT NOT NULL CHECK (kind IN ('issuer', 'client', 'pod', 'fee')),
  balance INTEGER NOT NULL DEFAULT 0,
  CHECK (kind = 'issuer' OR balance >= 0)
);
CREATE TABLE IF NOT EXISTS transfers (
  key     TEXT PRIMARY KEY,
  entries TEXT NOT NULL,   -- canonical: sorted 'account amount' lines, to spot a reused key
  memo    TEXT NOT NULL,
  at_ms   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  transfer TEXT NOT NULL REFERENCES transfers(key),
  account  TEXT NOT NULL REFERENCES accounts(name),
  amount   INTEGER NOT NULL CHECK (amount <> 0)
);
CREATE INDEX IF NOT EXISTS entries_by_account ON entries(account, id);
CREATE INDEX IF NOT EXISTS entries_by_transfer ON entries(transfer);
)sql";

[[noreturn]] void fail(const std::string& problem) {
  throw Error("hub", "ledger: " + problem);
}

void check_name(const std::string& what, const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    fail(what + " '" + name.substr(0, 40) + "': must be 1-" + std::to_string(kMaxNameBytes) +
         " bytes");
  }
}

std::string canonical(std::span<const Entry> entries) {
  std::vector<std::string> lines;
  for (const Entry& e : entries) lines.push_back(e.account + " " + std::to_string(e.amount));
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

}  // namespace

std::string_view account_kind_name(AccountKind kind) {
  switch (kind) {
    case AccountKind::ISSUER:
      return "issuer";
    case AccountKind::CLIENT:
      return "client";
    case AccountKind::POD:
      return "pod";
    case AccountKind::FEE:
      break;
  }
  return "fee";
}

Ledger::Ledger(SqliteDb& db) : db_(db) {
  db_.exec(kSchema);
}

void Ledger::open_account(const std::string& name, AccountKind kind) {
  check_name("account", name);
  Transaction tx(db_);
  Statement find(db_, "SELECT kind FROM accounts WHERE name = ?1");
  if (find.bind(1, name).step()) {
    if (find.column_text(0) != account_kind_name(kind)) {
      fail("account '" + name + "' exists as a " + find.column_text(0) + " account, not " +
           std::string(account_kind_name(kind)));
    }
    return;
  }
  Statement(db_, "INSERT INTO accounts(name, kind) VALUES (?1, ?2)")
      .bind(1, name)
      .bind(2, account_kind_name(kind))
      .step();
  tx.commit();
}

bool Ledger::transfer(const std::string& key, std::span<const Entry> entries,
                      const std::string& memo) {
  check_name("transfer key", key);
  if (memo.size() > kMaxMemoBytes) fail("transfer '" + key + "': memo too long");
  if (entries.size() < 2 || entries.size() > kMaxEntries) {
    fail("transfer '" + key + "': " + std::to_string(entries.size()) + " entries (2-" +
         std::to_string(kMaxEntries) + ")");
  }
  int64_t sum = 0;
  for (const Entry& e : entries) {
    check_name("account", e.account);
    if (e.amount == 0) fail("transfer '" + key + "': a zero entry for '" + e.account + "'");
    if (__builtin_add_overflow(sum, e.amount, &sum)) fail("transfer '" + key + "': overflow");
  }
  if (sum != 0) {
    fail("transfer '" + key + "': entries sum to " + std::to_string(sum) + ", not zero");
  }
  const std::string described = canonical(entries);

  Transaction tx(db_);
  Statement seen(db_, "SELECT entries FROM transfers WHERE key = ?1");
  if (seen.bind(1, key).step()) {
    if (seen.column_text(0) != described) {
      fail("transfer key '" + key + "' was used before for other entries");
    }
    return false;  // applied before: nothing to do (the transaction rolls back, empty)
  }
  Statement(db_, "INSERT INTO transfers(key, entries, memo, at_ms) VALUES (?1, ?2, ?3, ?4)")
      .bind(1, key)
      .bind(2, described)
      .bind(3, memo)
      .bind(4, std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count())
      .step();
  Statement insert(db_, "INSERT INTO entries(transfer, account, amount) VALUES (?1, ?2, ?3)");
  Statement move(db_, "UPDATE accounts SET balance = balance + ?2 WHERE name = ?1");
  for (const Entry& e : entries) {
    try {
      move.bind(1, e.account).bind(2, e.amount).step();
    } catch (const Error&) {
      if (db_.constraint_failed()) {
        fail("transfer '" + key + "': account '" + e.account + "' has " +
             std::to_string(balance(e.account)) + ", too little for " + std::to_string(-e.amount));
      }
      throw;
    }
    if (db_.changes() == 0) fail("transfer '" + key + "': no account '" + e.account + "'");
    move.reset();
    insert.bind(1, key).bind(2, e.account).bind(3, e.amount).step();
    insert.reset();
  }
  tx.commit();
  return true;
}

int64_t Ledger::balance(const std::string& account) const {
  Statement q(db_, "SELECT balance FROM accounts WHERE name = ?1");
  if (!q.bind(1, account).step()) fail("no account '" + account + "'");
  return q.column_int(0);
}

std::vector<HistoryRow> Ledger::history(const std::string& account) const {
  Statement q(db_,
              "SELECT e.id, e.transfer, t.memo, e.amount, "
              "SUM(e.amount) OVER (ORDER BY e.id) FROM entries e "
              "JOIN transfers t ON t.key = e.transfer WHERE e.account = ?1 ORDER BY e.id");
  q.bind(1, account);
  std::vector<HistoryRow> rows;
  while (q.step()) {
    rows.push_back(
        {q.column_int(0), q.column_text(1), q.column_text(2), q.column_int(3), q.column_int(4)});
  }
  return rows;
}

std::vector<std::string> Ledger::verify() const {
  std::vector<std::string> problems;
  Statement total(db_, "SELECT COALESCE(SUM(amount), 0) FROM entries");
  total.step();
  if (total.column_int(0) != 0) {
    problems.push_back("all entries sum to " + std::to_string(total.column_int(0)));
  }
  Statement unbalanced(db_,
                       "SELECT transfer, SUM(amount) FROM entries GROUP BY transfer "
                       "HAVING SUM(amount) <> 0");
  while (unbalanced.step()) {
    problems.push_back("transfer '" + unbalanced.column_text(0) + "' sums to " +
                       std::to_string(unbalanced.column_int(1)));
  }
  Statement empty(db_,
                  "SELECT key FROM transfers WHERE NOT EXISTS "
                  "(SELECT 1 FROM entries WHERE entries.transfer = transfers.key)");
  while (empty.step()) problems.push_back("transfer '" + empty.column_text(0) + "' has no entries");
  Statement drift(db_,
                  "SELECT a.name, a.balance, COALESCE(SUM(e.amount), 0) FROM accounts a "
                  "LEFT JOIN entries e ON e.account = a.name GROUP BY a.name "
                  "HAVING a.balance <> COALESCE(SUM(e.amount), 0)");
  while (drift.step()) {
    problems.push_back("account '" + drift.column_text(0) + "' shows " +
                       std::to_string(drift.column_int(1)) + " but its entries sum to " +
                       std::to_string(drift.column_int(2)));
  }
  Statement overdrawn(db_,
                      "SELECT name, balance FROM accounts WHERE kind <> 'issuer' AND balance < 0");
  while (overdrawn.step()) {
    problems.push_back("account '" + overdrawn.column_text(0) +
                       "' is overdrawn: " + std::to_string(overdrawn.column_int(1)));
  }
  return problems;
}

}  // namespace herd::hub
