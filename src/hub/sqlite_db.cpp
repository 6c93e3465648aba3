#include "hub/sqlite_db.h"

#include <sqlite3.h>

#include "util/error.h"

namespace herd::hub {

SqliteDb::SqliteDb(const std::string& path) : path_(path) {
  const int rc =
      sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("hub", "database '" + path + "': cannot open: " + why);
  }
  sqlite3_busy_timeout(db_, 5000);
  sqlite3_extended_result_codes(db_, 1);
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec("PRAGMA foreign_keys=ON");
}

SqliteDb::~SqliteDb() {
  sqlite3_close(db_);
}

int SqliteDb::changes() const {
  return sqlite3_changes(db_);
}

std::string SqliteDb::last_error() const {
  return sqlite3_errmsg(db_);
}

bool SqliteDb::constraint_failed() const {
  return (sqlite3_extended_errcode(db_) & 0xff) == SQLITE_CONSTRAINT;
}

void SqliteDb::exec(std::string_view sql) {
  const std::string text(sql);
  char* message = nullptr;
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message != nullptr ? message : last_error();
    sqlite3_free(message);
    throw Error("hub", "database '" + path_ + "': " + why + " (in: " + text.substr(0, 80) + ")");
  }
}

Statement::Statement(SqliteDb& db, std::string_view sql) : db_(db), sql_(sql) {
  if (sqlite3_prepare_v2(db.handle(), sql_.data(), static_cast<int>(sql_.size()), &stmt_,
                         nullptr) != SQLITE_OK) {
    throw Error("hub", "database '" + db.path() + "': " + db.last_error() +
                           " (in: " + sql_.substr(0, 80) + ")");
  }
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string why = db_.last_error();
  sqlite3_reset(stmt_);  // keeps the error code readable by constraint_failed()
  throw Error("hub", "database '" + db_.path() + "': " + why + " (in: " + sql_.substr(0, 80) + ")");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::column_int(int index) const {
  return sqlite3_column_int64(stmt_, index);
}

std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  return text != nullptr ? reinterpret_cast<const char*>(text) : "";
}

Transaction::Transaction(SqliteDb& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.exec("ROLLBACK");
    } catch (const Error&) {
      // The transaction is gone already (SQLite rolls back on some errors by itself).
    }
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace herd::hub
