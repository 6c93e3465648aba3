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
// transaction and nothing of it stays. Types both databases know; the entries' increasing
// id is the dialect's.
std::string schema(const Dialect& dialect) {
  return R"sql(
CREATE TABLE IF NOT EXISTS accounts (
  name    TEXT PRIMARY KEY,
  kind    TEXT NOT NULL CHECK (kind IN ('issuer', 'client', 'pod', 'fee')),
  balance BIGINT NOT NULL DEFAULT 0,
  CHECK (kind = 'issuer' OR balance >= 0)
);
CREATE TABLE IF NOT EXISTS transfers (
  key     TEXT PRIMARY KEY,
  entries TEXT NOT NULL,   -- canonical: sorted 'account amount' lines, to spot a reused key
  memo    TEXT NOT NULL,
  at_ms   BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
  id       )sql" +
         std::string(dialect.auto_id) + R"sql(,
  transfer TEXT NOT NULL REFERENCES transfers(key),
  account  TEXT NOT NULL REFERENCES accounts(name),
  amount   BIGINT NOT NULL CHECK (amount <> 0)
);
CREATE INDEX IF NOT EXISTS entries_by_account ON entries(account, id);
CREATE INDEX IF NOT EXISTS entries_by_transfer ON entries(transfer);
)sql";
}

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

// True when `key` was applied before with these entries (`described`), false when never;
// throws when it was applied with other entries.
bool seen_before(Database& db, const std::string& key, const std::string& described) {
  const Result seen = db.run("SELECT entries FROM transfers WHERE key = $1", {key});
  if (seen.rows.empty()) return false;
  if (seen.rows[0].text(0) != described) {
    fail("transfer key '" + key + "' was used before for other entries");
  }
  return true;
}

AccountKind parse_kind(const std::string& name) {
  for (AccountKind kind :
       {AccountKind::ISSUER, AccountKind::CLIENT, AccountKind::POD, AccountKind::FEE}) {
    if (account_kind_name(kind) == name) return kind;
  }
  fail("an account of unknown kind '" + name + "'");
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

Ledger::Ledger(Database& db) : db_(db) {
  create_schema(db_, schema(db_.dialect()));  // two hubs at once: one after the other
}

void Ledger::open_account(const std::string& name, AccountKind kind) {
  check_name("account", name);
  const std::string wanted(account_kind_name(kind));
  for (int attempt = 1;; ++attempt) {
    const Result found = db_.run("SELECT kind FROM accounts WHERE name = $1", {name});
    if (!found.rows.empty()) {
      const std::string& has = found.rows[0].text(0);
      if (has != wanted) {
        fail("account '" + name + "' exists as a " + has + " account, not " + wanted);
      }
      return;
    }
    try {
      db_.run("INSERT INTO accounts(name, kind) VALUES ($1, $2)", {name, wanted});
      return;
    } catch (const ConstraintViolation& e) {
      // Another hub created it since the SELECT: read it again.
      if (e.kind() != Constraint::UNIQUE || attempt == 2) throw;
    }
  }
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
  // Accounts are written in the order of their names, so two transfers at once lock the
  // rows they share in the same order and never deadlock (PostgreSQL's row locks).
  std::vector<Entry> ordered(entries.begin(), entries.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Entry& a, const Entry& b) { return a.account < b.account; });

  Transaction tx(db_);
  if (seen_before(db_, key, described)) return false;  // nothing to do: rolls back, empty
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  try {
    db_.run("INSERT INTO transfers(key, entries, memo, at_ms) VALUES ($1, $2, $3, $4)",
            {key, described, memo, now_ms});
  } catch (const ConstraintViolation& e) {
    // Another hub inserted the key after our SELECT; this INSERT waited for its
    // transaction and found it committed (PostgreSQL). Read what it applied.
    if (e.kind() != Constraint::UNIQUE) throw;
    tx.rollback();
    if (seen_before(db_, key, described)) return false;
    throw;
  }
  for (const Entry& e : ordered) {
    Result moved;
    try {
      moved = db_.run("UPDATE accounts SET balance = balance + $2 WHERE name = $1",
                      {e.account, e.amount});
    } catch (const ConstraintViolation& v) {
      if (v.kind() != Constraint::CHECK) throw;
      tx.rollback();  // first: PostgreSQL reads nothing more in a failed transaction
      throw InsufficientFunds("hub", "ledger: transfer '" + key + "': account '" + e.account +
                                         "' has " + std::to_string(balance(e.account)) +
                                         ", too little for " + std::to_string(-e.amount));
    }
    if (moved.changed == 0) fail("transfer '" + key + "': no account '" + e.account + "'");
    // The entry's id is drawn while this transaction holds the account's row: an account's
    // entries are numbered in the order their transfers commit, as history() needs.
    db_.run("INSERT INTO entries(transfer, account, amount) VALUES ($1, $2, $3)",
            {key, e.account, e.amount});
  }
  tx.commit();
  return true;
}

int64_t Ledger::balance(const std::string& account) const {
  const Result q = db_.run("SELECT balance FROM accounts WHERE name = $1", {account});
  if (q.rows.empty()) fail("no account '" + account + "'");
  return q.rows[0].integer(0);
}

std::vector<HistoryRow> Ledger::history(const std::string& account) const {
  const Result q = db_.run(
      "SELECT e.id, e.transfer, t.memo, e.amount, "
      "SUM(e.amount) OVER (ORDER BY e.id) FROM entries e "
      "JOIN transfers t ON t.key = e.transfer WHERE e.account = $1 ORDER BY e.id",
      {account});
  std::vector<HistoryRow> rows;
  for (const Row& r : q.rows) {
    rows.push_back({r.integer(0), r.text(1), r.text(2), r.integer(3), r.integer(4)});
  }
  return rows;
}

std::vector<AccountBalance> Ledger::accounts() const {
  const Result q = db_.run("SELECT name, kind, balance FROM accounts ORDER BY name");
  std::vector<AccountBalance> out;
  for (const Row& r : q.rows) {
    out.push_back({r.text(0), parse_kind(r.text(1)), r.integer(2)});
  }
  return out;
}

std::vector<std::string> Ledger::verify() const {
  std::vector<std::string> problems;
  const Result total = db_.run("SELECT COALESCE(SUM(amount), 0) FROM entries");
  if (total.rows[0].integer(0) != 0) {
    problems.push_back("all entries sum to " + total.rows[0].text(0));
  }
  const Result unbalanced = db_.run(
      "SELECT transfer, SUM(amount) FROM entries GROUP BY transfer HAVING SUM(amount) <> 0");
  for (const Row& r : unbalanced.rows) {
    problems.push_back("transfer '" + r.text(0) + "' sums to " + r.text(1));
  }
  const Result empty = db_.run(
      "SELECT key FROM transfers WHERE NOT EXISTS "
      "(SELECT 1 FROM entries WHERE entries.transfer = transfers.key)");
  for (const Row& r : empty.rows) problems.push_back("transfer '" + r.text(0) + "' has no entries");
  const Result drift = db_.run(
      "SELECT a.name, a.balance, COALESCE(SUM(e.amount), 0) FROM accounts a "
      "LEFT JOIN entries e ON e.account = a.name GROUP BY a.name, a.balance "
      "HAVING a.balance <> COALESCE(SUM(e.amount), 0)");
  for (const Row& r : drift.rows) {
    problems.push_back("account '" + r.text(0) + "' shows " + r.text(1) +
                       " but its entries sum to " + r.text(2));
  }
  const Result overdrawn =
      db_.run("SELECT name, balance FROM accounts WHERE kind <> 'issuer' AND balance < 0");
  for (const Row& r : overdrawn.rows) {
    problems.push_back("account '" + r.text(0) + "' is overdrawn: " + r.text(1));
  }
  return problems;
}

}  // namespace herd::hub
