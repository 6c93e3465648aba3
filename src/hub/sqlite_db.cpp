#include "hub/sqlite_db.h"

#include <sqlite3.h>

#include <memory>

namespace herd::hub {
namespace {

const Dialect kSqlite{"sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT", ""};  // BEGIN IMMEDIATE locks

struct FinalizeStatement {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};

}  // namespace

SqliteDb::SqliteDb(const std::string& path) : path_(path) {
  const int rc =
      sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("hub", "sqlite: '" + path + "': cannot open: " + why);
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

const Dialect& SqliteDb::dialect() const {
  return kSqlite;
}

// Throws the connection's last error, as a ConstraintViolation when it was one.
void SqliteDb::fail(std::string_view sql) const {
  const std::string message = "sqlite: '" + path_ + "': " + sqlite3_errmsg(db_) +
                              " (in: " + std::string(sql.substr(0, 80)) + ")";
  const int code = sqlite3_extended_errcode(db_);
  if ((code & 0xff) != SQLITE_CONSTRAINT) throw Error("hub", message);
  Constraint kind = Constraint::OTHER;
  if (code == SQLITE_CONSTRAINT_CHECK) kind = Constraint::CHECK;
  if (code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY) {
    kind = Constraint::UNIQUE;
  }
  throw ConstraintViolation(kind, message);
}

void SqliteDb::exec(std::string_view sql) {
  const std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
}

Result SqliteDb::run(std::string_view sql, const std::vector<Param>& params) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &raw, nullptr) !=
      SQLITE_OK) {
    fail(sql);
  }
  const std::unique_ptr<sqlite3_stmt, FinalizeStatement> stmt(raw);
  // $1 is a named parameter to SQLite (the name "$1"); it may appear more than once.
  HERD_CHECK_MSG(sqlite3_bind_parameter_count(raw) <= static_cast<int>(params.size()),
                 std::string(sql.substr(0, 80)));
  for (size_t i = 0; i < params.size(); ++i) {
    std::string name = std::to_string(i + 1);
    name.insert(name.begin(), '$');  // not "$" + ...: GCC 12 warns wrongly (-Wrestrict)
    const int index = sqlite3_bind_parameter_index(raw, name.c_str());
    HERD_CHECK_MSG(index > 0, "no " + name + " in: " + std::string(sql.substr(0, 80)));
    if (const int64_t* value = std::get_if<int64_t>(&params[i])) {
      sqlite3_bind_int64(raw, index, *value);
    } else {
      const std::string& text = std::get<std::string>(params[i]);
      sqlite3_bind_text(raw, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    }
  }
  Result result;
  int rc;
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    std::vector<std::string> values(sqlite3_column_count(raw));
    for (size_t c = 0; c < values.size(); ++c) {
      const unsigned char* text = sqlite3_column_text(raw, static_cast<int>(c));
      if (text != nullptr) values[c] = reinterpret_cast<const char*>(text);
    }
    result.rows.emplace_back(std::move(values));
  }
  if (rc != SQLITE_DONE) fail(sql);
  result.changed = sqlite3_stmt_readonly(raw) ? 0 : sqlite3_changes(db_);
  return result;
}

void SqliteDb::begin() {
  exec("BEGIN IMMEDIATE");
}

void SqliteDb::commit() {
  exec("COMMIT");
}

void SqliteDb::rollback() {
  exec("ROLLBACK");
}

}  // namespace herd::hub
