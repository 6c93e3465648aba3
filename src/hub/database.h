// The hub's database, whichever it is: SQLite (a file, one hub) or PostgreSQL (a server
// several hub replicas share). The interface is what the ledger needs and no more: run one
// statement with parameters and read all its rows, run plain SQL, transactions, and a
// constraint violation told apart from other errors.
//
// SQL is written once for both: parameters are $1, $2, ... (PostgreSQL's syntax; SQLite
// binds them by name), types are those both know (TEXT, BIGINT), and what differs is a
// Dialect field (an auto-increment key). Values travel as int64 or text; rows come back as
// text (PostgreSQL's wire format), read with Row::integer or Row::text.
//
// Errors: herd::Error("hub", "<backend>: <where>: <message>"), and ConstraintViolation (an
// Error) when a CHECK, UNIQUE or other constraint refused a statement. On PostgreSQL an
// error aborts the transaction around it: roll it back before running anything else.
// Not thread-safe: one Database per thread (or process).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "util/error.h"

namespace herd::hub {

using Param = std::variant<int64_t, std::string>;

class Row {
 public:
  explicit Row(std::vector<std::string> values) : values_(std::move(values)) {}
  // Columns from 0. A NULL reads as "" or 0; integer() throws on text that is not one.
  const std::string& text(size_t column) const;
  int64_t integer(size_t column) const;

 private:
  std::vector<std::string> values_;
};

struct Result {
  std::vector<Row> rows;
  int64_t changed = 0;  // rows an INSERT, UPDATE or DELETE changed
};

enum class Constraint { CHECK, UNIQUE, OTHER };  // UNIQUE includes a primary key

class ConstraintViolation : public Error {
 public:
  ConstraintViolation(Constraint kind, std::string_view message)
      : Error("hub", message), kind_(kind) {}
  Constraint kind() const { return kind_; }

 private:
  Constraint kind_;
};

// What the schema spells differently.
struct Dialect {
  std::string_view name;  // "sqlite", "postgresql"
  // A BIGINT primary key the database numbers in increasing order.
  std::string_view auto_id;
  // Run first in create_schema()'s transaction so that two processes creating the same
  // tables wait for each other (empty: the transaction's own lock does it).
  std::string_view schema_lock;
};

class Database {
 public:
  virtual ~Database() = default;

  virtual const Dialect& dialect() const = 0;
  // Statements without parameters or rows (several, separated by ';').
  virtual void exec(std::string_view sql) = 0;
  // One statement with parameters $1..$n (params[0] is $1); all its rows.
  virtual Result run(std::string_view sql, const std::vector<Param>& params) = 0;
  Result run(std::string_view sql, std::initializer_list<Param> params = {}) {
    return run(sql, std::vector<Param>(params));
  }

  // Use Transaction rather than these. begin() takes the locks the backend needs for two
  // writers not to deadlock: SQLite's write lock at once, PostgreSQL's row locks as rows
  // are written (READ COMMITTED).
  virtual void begin() = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;
};

// begin() ... rollback() unless commit() or rollback() was called.
class Transaction {
 public:
  explicit Transaction(Database& db) : db_(db) { db_.begin(); }
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();
  void rollback();  // early, to read again after an error (PostgreSQL needs it)

 private:
  Database& db_;
  bool open_ = true;
};

// Runs `sql` (CREATE ... IF NOT EXISTS statements) in one transaction under the dialect's
// schema lock. Two hub replicas starting at once on an empty PostgreSQL database both
// create the tables: without the lock the later CREATE ... IF NOT EXISTS can fail on the
// catalog ("relation ... already exists", or a UNIQUE violation) while the first commits.
void create_schema(Database& db, std::string_view sql);

// "postgresql://..." or "postgres://..." (a libpq connection URI): PostgreSQL; anything
// else: the path of a SQLite file, created when missing. Throws herd::Error("hub", ...)
// when the database cannot be opened or herd was built without that backend.
std::unique_ptr<Database> open_database(const std::string& spec);

}  // namespace herd::hub
