// The hub's database in a SQLite file (database.h): one hub, or several processes on one
// machine sharing the file. Errors become herd::Error("hub", "sqlite: '<path>': <message>").
#pragma once

#include <string>
#include <string_view>

#include "hub/database.h"

struct sqlite3;

namespace herd::hub {

class SqliteDb : public Database {
 public:
  // Opens or creates the file, in WAL mode with synchronous=FULL (a committed transaction
  // survives a crash, one in progress is rolled back on the next open) and a 5 s busy
  // timeout (several processes may share the file).
  explicit SqliteDb(const std::string& path);
  ~SqliteDb() override;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  const Dialect& dialect() const override;
  void exec(std::string_view sql) override;
  Result run(std::string_view sql, const std::vector<Param>& params) override;
  using Database::run;
  // BEGIN IMMEDIATE: the write lock at once, so two writers never deadlock upgrading a
  // read lock, and one transaction's reads stay true until it commits.
  void begin() override;
  void commit() override;
  void rollback() override;

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(std::string_view sql) const;

  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace herd::hub
