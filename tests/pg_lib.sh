# A throwaway PostgreSQL server for end-to-end tests, as src/hub/test_postgres.cpp starts
# one for the unit tests: initdb into a fresh directory under /tmp, listening only on a
# unix socket there (no TCP port: tests at once never collide), fsync off. PostgreSQL
# refuses root: as root the server runs as the `postgres` user Debian's package creates,
# which owns the directory; otherwise as the current user. Binaries: $HERD_PG_BIN, else the
# newest /usr/lib/postgresql/*/bin, else the PATH. Without them the test fails (not skips)
# saying to run scripts/install-deps.
#
#   source tests/pg_lib.sh
#   pg_start                 # sets PG_DIR (the socket's directory); stop it with pg_stop
#   uri=$(pg_createdb herd)  # postgresql:///herd?host=$PG_DIR&user=postgres
#   pg_sql herd "SELECT 1"   # one value per line (psql -At)
#   pg_stop                  # in the test's EXIT trap; safe to call twice

PG_DIR=""
PG_BIN=""
PG_AS=()

pg_find_bin() {
  if [ -n "${HERD_PG_BIN:-}" ]; then
    [ -x "$HERD_PG_BIN/initdb" ] && [ -x "$HERD_PG_BIN/pg_ctl" ] && { echo "$HERD_PG_BIN"; return; }
    echo "pg_lib: HERD_PG_BIN=$HERD_PG_BIN holds no initdb and pg_ctl: run scripts/install-deps" >&2
    return 1
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return; fi
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(command -v initdb)"
    return
  fi
  echo "pg_lib: PostgreSQL's server binaries (initdb, pg_ctl, createdb, psql) are not in" \
    "/usr/lib/postgresql/*/bin or the PATH: run scripts/install-deps (or set HERD_PG_BIN)" >&2
  return 1
}

pg_start() {
  PG_BIN=$(pg_find_bin) || return 1
  PG_DIR=$(mktemp -d /tmp/herd-pg-XXXXXX)  # short: a socket's path has ~100 bytes
  PG_AS=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || {
      echo "pg_lib: running as root, and PostgreSQL refuses root: no 'postgres' user to run" \
        "it as (Debian's postgresql package creates it: run scripts/install-deps)" >&2
      return 1
    }
    chown postgres: "$PG_DIR"
    PG_AS=(runuser -u postgres --)
  fi
  # The server's user may not enter the test's working directory: run from PG_DIR.
  (cd "$PG_DIR" && "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust \
    -E UTF8 --no-locale --no-sync >"$PG_DIR/initdb.log" 2>&1) ||
    { echo "pg_lib: initdb failed:" >&2; tail -20 "$PG_DIR/initdb.log" >&2; return 1; }
  (cd "$PG_DIR" && "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
    -w -t 60 -o "-k $PG_DIR -c listen_addresses='' -c fsync=off -c full_page_writes=off" \
    start >/dev/null) ||
    { echo "pg_lib: the server did not start:" >&2; tail -20 "$PG_DIR/server.log" >&2; return 1; }
}

# pg_createdb NAME: creates the database, prints its URI (what herd hub --db takes).
pg_createdb() {
  "$PG_BIN/createdb" -h "$PG_DIR" -U postgres "$1" || return 1
  echo "postgresql:///$1?host=$PG_DIR&user=postgres"
}

# pg_sql DATABASE SQL: its rows, one value per line, columns split by '|'.
pg_sql() {
  "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d "$1" -X -q -At -v ON_ERROR_STOP=1 -c "$2"
}

pg_stop() {
  [ -n "$PG_DIR" ] || return 0
  (cd "$PG_DIR" && "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop \
    >/dev/null 2>&1) || true
  rm -rf "$PG_DIR"
  PG_DIR=""
}
