// The hub's database on a PostgreSQL server (database.h), which several hub replicas
// share: one connection (libpq), transactions in READ COMMITTED (a row being written by
// one is locked to the other until it commits; a UNIQUE key being inserted by one makes
// the other wait, then fail). Errors become herd::Error("hub", "postgresql: <uri>: ...")
// with the password left out of the URI.
//
// Built when libpq is found (HERD_HAVE_POSTGRESQL); open_database() says so otherwise.
#pragma once

#include <string>
#include <string_view>

#include "hub/database.h"

struct pg_conn;
struct pg_result;

namespace herd::hub {

class PgDb : public Database {
 public:
  // Connects with a libpq URI: postgresql://user:password@host:port/dbname?options, or a
  // unix socket's directory as postgresql:///dbname?host=/path.
  explicit PgDb(const std::string& uri);
  ~PgDb() override;
  PgDb(const PgDb&) = delete;
  PgDb& operator=(const PgDb&) = delete;

  const Dialect& dialect() const override;
  void exec(std::string_view sql) override;
  Result run(std::string_view sql, const std::vector<Param>& params) override;
  using Database::run;
  void begin() override;
  void commit() override;
  void rollback() override;

 private:
  // Returns `result` when it succeeded; else clears it and throws its error, as a
  // ConstraintViolation when it was one (SQLSTATE class 23).
  pg_result* check(pg_result* result, std::string_view sql) const;

  pg_conn* conn_ = nullptr;
  std::string where_;  // the URI without its password
};

}  // namespace herd::hub
