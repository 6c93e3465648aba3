// A thin C++ face on SQLite's C API for the hub's state (the ledger now; the registry
// later): a connection, prepared statements with bound parameters, and transactions that
// roll back unless committed. Errors become herd::Error("hub", "<what>: <sqlite message>").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace herd::hub {

class SqliteDb;

class Statement {
 public:
  Statement(SqliteDb& db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are numbered from 1, as in SQL's ?1, ?2, ...
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, std::string_view value);
  // Runs to the next row: true when there is one, false when done. Throws on errors,
  // a CHECK or UNIQUE constraint failing included (constraint_failed() says so).
  bool step();
  void reset();                         // for running it again with new parameters
  int64_t column_int(int index) const;  // columns from 0
  std::string column_text(int index) const;

 private:
  SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

class SqliteDb {
 public:
  // Opens or creates the file, in WAL mode with synchronous=FULL (a committed transaction
  // survives a crash, one in progress is rolled back on the next open) and a 5 s busy
  // timeout (several processes may share the file).
  explicit SqliteDb(const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  void exec(std::string_view sql);  // statements without parameters or rows
  sqlite3* handle() { return db_; }
  const std::string& path() const { return path_; }
  int changes() const;  // rows the last INSERT, UPDATE or DELETE changed
  // The last error's message, and whether it was a constraint (CHECK, UNIQUE, ...).
  std::string last_error() const;
  bool constraint_failed() const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// BEGIN IMMEDIATE (the write lock at once, so two writers never deadlock upgrading) ...
// ROLLBACK unless commit() was called.
class Transaction {
 public:
  explicit Transaction(SqliteDb& db);
  ~Transaction();
  void commit();

 private:
  SqliteDb& db_;
  bool done_ = false;
};

}  // namespace herd::hub
