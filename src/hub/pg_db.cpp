#include "hub/pg_db.h"

#include <libpq-fe.h>

#include <memory>

namespace herd::hub {
namespace {

// The schema lock: a transaction-scoped advisory lock on a key of herd's own ("herd" in
// ASCII), released at COMMIT.
const Dialect kPostgresql{"postgresql", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                          "SELECT pg_advisory_xact_lock(1751478884)"};

struct ClearResult {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ClearResult>;

// postgresql://hub:secret@db/herd?password=x -> postgresql://hub:***@db/herd?password=***
std::string without_password(std::string uri) {
  const size_t scheme = uri.find("://");
  const size_t at = uri.find('@');
  const size_t colon = uri.find(':', scheme + 3);
  if (scheme != std::string::npos && at != std::string::npos && colon < at) {
    uri.replace(colon + 1, at - colon - 1, "***");
  }
  const size_t password = uri.find("password=");
  if (password != std::string::npos) {
    const size_t start = password + 9;
    uri.replace(start, uri.find('&', start) - start, "***");  // npos - start: to the end
  }
  return uri;
}

void ignore_notice(void*, const char*) {}

std::string trimmed(const char* text) {
  std::string out = text != nullptr ? text : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

PgDb::PgDb(const std::string& uri) : where_(without_password(uri)) {
  conn_ = PQconnectdb(uri.c_str());
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    const std::string why = conn_ != nullptr ? trimmed(PQerrorMessage(conn_)) : "out of memory";
    PQfinish(conn_);
    conn_ = nullptr;
    throw Error("hub", "postgresql: '" + where_ + "': cannot connect: " + why);
  }
  // The server's notices ("relation already exists, skipping") are not errors: quiet.
  PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
}

PgDb::~PgDb() {
  PQfinish(conn_);
}

const Dialect& PgDb::dialect() const {
  return kPostgresql;
}

PGresult* PgDb::check(PGresult* result, std::string_view sql) const {
  const ExecStatusType status = PQresultStatus(result);  // PGRES_FATAL_ERROR when null
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  const ResultPtr owned(result);
  std::string why = result != nullptr ? trimmed(PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY))
                                      : std::string();
  if (why.empty()) why = trimmed(PQerrorMessage(conn_));  // the connection's, as when lost
  const std::string message =
      "postgresql: '" + where_ + "': " + why + " (in: " + std::string(sql.substr(0, 80)) + ")";
  const std::string state =
      result != nullptr ? trimmed(PQresultErrorField(result, PG_DIAG_SQLSTATE)) : "";
  if (!state.starts_with("23")) throw Error("hub", message);
  const Constraint kind = state == "23514"   ? Constraint::CHECK
                          : state == "23505" ? Constraint::UNIQUE
                                             : Constraint::OTHER;
  throw ConstraintViolation(kind, message);
}

void PgDb::exec(std::string_view sql) {
  const std::string text(sql);
  const ResultPtr result(check(PQexec(conn_, text.c_str()), sql));
}

Result PgDb::run(std::string_view sql, const std::vector<Param>& params) {
  // Every value goes as text; the server gives each $n the type its place in the SQL needs.
  std::vector<std::string> texts;
  texts.reserve(params.size());
  for (const Param& param : params) {
    if (const int64_t* value = std::get_if<int64_t>(&param)) {
      texts.push_back(std::to_string(*value));
    } else {
      texts.push_back(std::get<std::string>(param));
      if (texts.back().find('\0') != std::string::npos) {
        throw Error("hub", "postgresql: '" + where_ + "': a text value holds a NUL byte (in: " +
                               std::string(sql.substr(0, 80)) + ")");
      }
    }
  }
  std::vector<const char*> values;
  for (const std::string& text : texts) values.push_back(text.c_str());
  const std::string text(sql);
  const ResultPtr pg(check(PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()),
                                        nullptr, values.data(), nullptr, nullptr, 0),
                           sql));
  Result result;
  const int n_rows = PQntuples(pg.get());
  const int n_columns = PQnfields(pg.get());
  for (int r = 0; r < n_rows; ++r) {
    std::vector<std::string> row(n_columns);
    for (int c = 0; c < n_columns; ++c) row[c] = PQgetvalue(pg.get(), r, c);  // NULL: ""
    result.rows.emplace_back(std::move(row));
  }
  if (PQresultStatus(pg.get()) == PGRES_COMMAND_OK) {
    const std::string changed = PQcmdTuples(pg.get());  // "" for statements without a count
    result.changed = changed.empty() ? 0 : std::stoll(changed);
  }
  return result;
}

void PgDb::begin() {
  exec("BEGIN ISOLATION LEVEL READ COMMITTED");
}

void PgDb::commit() {
  // COMMIT of a transaction an error aborted answers ROLLBACK, not an error.
  const ResultPtr result(check(PQexec(conn_, "COMMIT"), "COMMIT"));
  if (std::string_view(PQcmdStatus(result.get())) == "ROLLBACK") {
    throw Error("hub", "postgresql: '" + where_ + "': COMMIT rolled back (an earlier error)");
  }
}

void PgDb::rollback() {
  exec("ROLLBACK");
}

}  // namespace herd::hub
