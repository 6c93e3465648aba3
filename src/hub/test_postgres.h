// A throwaway PostgreSQL server for tests (the ledger's, and the end-to-end tests' hubs
// sharing one state): initdb into a fresh directory under /tmp, then pg_ctl start,
// listening only on a unix socket in that directory (no TCP port: tests running at once
// never collide); stopped and removed when destroyed. fsync is off: it is a test server.
//
// PostgreSQL refuses to run as root, and tests run as root in CI: then the server runs as
// the `postgres` user Debian's package creates (runuser), which owns the directory.
// Server binaries: $HERD_PG_BIN, else the newest /usr/lib/postgresql/*/bin (Debian) or
// Homebrew's postgresql@*, else initdb on the PATH. Without them the constructor throws
// herd::Error saying to run scripts/install-deps: a test needing the server fails, it is
// not skipped.
//
// Not copyable. A forked child that inherits the object leaves the server alone (only the
// process that started it stops it).
#pragma once

#include <sys/types.h>
#include <string>
#include <vector>

namespace herd::hub {

class TestPostgres {
 public:
  TestPostgres();
  ~TestPostgres();
  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  // Creates an empty database `name` ([a-z0-9_]) and returns its URI.
  std::string create_database(const std::string& name);
  // postgresql:///<database>?host=<directory>&user=postgres
  std::string uri(const std::string& database) const;
  const std::string& directory() const { return dir_; }

 private:
  // Runs argv (as the server's user when `as_server`), its output appended to the log;
  // throws herd::Error with the log's end when it fails.
  void run(std::vector<std::string> argv, bool as_server) const;

  std::string bin_;          // initdb, pg_ctl, createdb
  std::string dir_;          // data/, the socket, server.log
  std::string server_user_;  // empty: this process's own user
  pid_t owner_ = 0;
  bool started_ = false;
};

}  // namespace herd::hub
