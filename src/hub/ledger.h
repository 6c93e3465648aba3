// The hub's credits (issue 19): a double-entry ledger in the hub's database. Every
// transfer is a set of entries that sums to zero, applied whole or not at all, under a key
// that makes it idempotent (a retried request is never charged twice: the same key with
// the same entries is applied once; with other entries it is an error). No account but
// the issuer's goes below zero, checked by the database itself (a CHECK constraint), so a
// transfer that would overdraw is refused whole. history() is the audit trail of an
// account; verify() checks that every transfer and all entries sum to zero and that every
// balance is the sum of its entries, as after a hub killed mid-transfer.
//
// Amounts are integers of the smallest unit (the hub prices tokens in it). Accounts:
//   issuer  where credits come from (grants, purchases): may go negative, by as much as
//           credits exist elsewhere
//   client  spends per token; pod earns per verified output token; fee the hub's share.
//
// The database is SQLite (one hub) or PostgreSQL (hub replicas sharing it): database.h.
// On PostgreSQL two hubs may apply transfers at once: the same key raced by both is
// applied by one (the other returns false, or throws when its entries differ), each
// balance CHECK holds on every commit, and no entry is lost.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hub/database.h"
#include "hub/sqlite_db.h"  // callers that open a SqliteDb themselves, as before open_database

namespace herd::hub {

enum class AccountKind { ISSUER, CLIENT, POD, FEE };

struct Entry {
  std::string account;
  int64_t amount = 0;  // credit (+) or debit (-); never 0
};

struct HistoryRow {
  int64_t entry_id = 0;  // increasing: the order entries were made
  std::string transfer;  // its key
  std::string memo;
  int64_t amount = 0;
  int64_t balance_after = 0;
};

struct AccountBalance {
  std::string name;
  AccountKind kind = AccountKind::CLIENT;
  int64_t balance = 0;
};

// A transfer refused because an account would go below zero (a client out of credits, or a
// pending balance another hub replica moved first): the ledger's message, applied nothing.
class InsufficientFunds : public Error {
 public:
  using Error::Error;
};

class Ledger {
 public:
  // Opens or creates the ledger's tables in `db`, which must outlive the Ledger.
  explicit Ledger(Database& db);

  // Creates the account, or does nothing when it exists with that kind; another kind is
  // an error. Names: 1-200 bytes.
  void open_account(const std::string& name, AccountKind kind);
  // Applies the entries as one transfer under `key` (1-200 bytes): returns true when it
  // was applied now, false when that key was applied before with the same entries.
  // Throws herd::Error("hub", "ledger: ...") naming the problem, applying nothing: entries
  // that do not sum to zero or are fewer than two, a zero amount, an unknown account, an
  // account that would go below zero (InsufficientFunds), the key reused with other entries.
  bool transfer(const std::string& key, std::span<const Entry> entries,
                const std::string& memo = "");

  int64_t balance(const std::string& account) const;
  std::vector<HistoryRow> history(const std::string& account) const;
  // Problems found, empty when consistent: a transfer or the whole not summing to zero, a
  // balance other than the sum of its entries, a non-issuer balance below zero.
  std::vector<std::string> verify() const;
  // Every account with its kind and balance, by name: the audit view.
  std::vector<AccountBalance> accounts() const;

 private:
  Database& db_;
};

std::string_view account_kind_name(AccountKind kind);

}  // namespace herd::hub
