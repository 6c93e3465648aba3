#include "hub/database.h"

#include <charconv>

#include "hub/pg_db.h"
#include "hub/sqlite_db.h"

namespace herd::hub {

const std::string& Row::text(size_t column) const {
  HERD_CHECK_MSG(column < values_.size(),
                 "column " + std::to_string(column) + " of " + std::to_string(values_.size()));
  return values_[column];
}

int64_t Row::integer(size_t column) const {
  const std::string& value = text(column);
  if (value.empty()) return 0;  // NULL
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    throw Error("hub", "database: column " + std::to_string(column) + " is '" +
                           value.substr(0, 40) + "', not an integer");
  }
  return out;
}

Transaction::~Transaction() {
  if (!open_) return;
  try {
    db_.rollback();
  } catch (const Error&) {
    // The transaction is gone already (SQLite ends some on errors by itself), or the
    // connection is: the server rolls it back.
  }
}

void Transaction::commit() {
  HERD_CHECK(open_);
  db_.commit();  // when it fails, the destructor rolls back (SQLite may keep it open)
  open_ = false;
}

void Transaction::rollback() {
  HERD_CHECK(open_);
  open_ = false;
  db_.rollback();
}

void create_schema(Database& db, std::string_view sql) {
  Transaction t(db);
  if (!db.dialect().schema_lock.empty()) db.run(db.dialect().schema_lock);
  db.exec(sql);
  t.commit();
}

std::unique_ptr<Database> open_database(const std::string& spec) {
  if (spec.starts_with("postgresql://") || spec.starts_with("postgres://")) {
#ifdef HERD_HAVE_POSTGRESQL
    return std::make_unique<PgDb>(spec);
#else
    throw Error("hub", "database '" + spec.substr(0, spec.find(':')) +
                           "://...': herd was built without PostgreSQL (libpq-dev: run "
                           "scripts/install-deps, then configure and build again)");
#endif
  }
#ifdef HERD_HAVE_SQLITE
  return std::make_unique<SqliteDb>(spec);
#else
  throw Error("hub", "database '" + spec +
                         "': herd was built without SQLite (libsqlite3-dev: run "
                         "scripts/install-deps, then configure and build again)");
#endif
}

}  // namespace herd::hub
