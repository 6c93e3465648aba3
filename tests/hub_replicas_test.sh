#!/usr/bin/env bash
# Two hub replicas over one PostgreSQL (issue 19, "Scale"): both `herd hub` processes on one
# --db postgresql://..., two `herd serve` pods each registered with both (--hub twice), and
# a client (tests/node/hub_replicas_test.mjs) sending 40 requests, some streamed, spread
# over both replicas the way a load balancer does: a request whose connection to a replica
# fails before any byte of answer is sent to the other. One replica is killed with -9 in the
# middle of the run, while a streamed answer from it is under way. Then: every request was
# answered; the ledger (GET /api/ledger on the survivor) has no problems and sums to zero;
# the `request:` transfers in the database are the answers the client got whole (precisely:
# docs/network.md, "Replicas"); the killed replica restarts on the same database with the
# ledger consistent and serves again.
set -euo pipefail
herd=$(realpath "${1:?usage: hub_replicas_test.sh path/to/herd}")
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node/node_modules/openai" ] ||
  { echo "FAIL: tests/node has no node_modules: run scripts/install-deps"; exit 1; }
source "$here/pg_lib.sh"
source "$here/hub_lib.sh"
hub_lib_init
on_exit=pg_stop

pg_start || fail "PostgreSQL did not start"
db=$(pg_createdb herd) || fail "createdb"
synth_model "$dir/model.gguf"

# hub NAME PORT: a replica on the shared database (and its secret, which names the clients'
# accounts); settling every second, so both replicas settle the same pods at once during the
# run. The client reads the ledger with the operator key.
echo operator-key >"$dir/operators"
chmod 600 "$dir/operators"
hub() {
  "$herd" hub --port "$2" --allow-private-pods --db "$db" --secret-file "$dir/hub.secret" \
    --api-key replica-key --operator-key-file "$dir/operators" --credits 1000000 \
    --heartbeat 1 --pod-timeout 10 --settle 1 2>>"$dir/$1.log" &
  hub_pid=$!
  pids+=("$hub_pid")
}
hub_url() {
  for _ in $(seq 200); do grep -q "listening on" "$dir/$1.log" && break; sleep 0.05; done
  grep -o "http://[0-9.]*:[0-9]*" "$dir/$1.log" | tail -1
}
# Both at once: their schema, accounts and grants race on the empty database.
hub hub-a 0
pid_a=$hub_pid
hub hub-b 0
url_a=$(hub_url hub-a)
url_b=$(hub_url hub-b)
[ -n "$url_a" ] && [ -n "$url_b" ] || fail "a replica did not say where it listens"

for name in pod-1 pod-2; do
  pod_start "$name" "$dir/model.gguf" --alias herd-replicas --threads 1 --hub "$url_a" \
    --hub "$url_b" --hub-name "$name"
done
for name in pod-1 pod-2; do
  for url in "$url_a" "$url_b"; do wait_registered "$name" "$url"; done
done

HERD_HUB_URLS="$url_a $url_b" HERD_KILL_PID=$pid_a HERD_API_KEY=replica-key HERD_OPERATOR_KEY=operator-key \
  node "$here/node/hub_replicas_test.mjs" >"$dir/client.out" || { cat "$dir/client.out"; fail "the client"; }
cat "$dir/client.out"
{ wait "$pid_a"; } 2>/dev/null || true  # quiet: bash would report the kill
grep -q '^answered 40 of 40' "$dir/client.out" || fail "not every request was answered"

# The books, from the database itself: every `request:` transfer of a replica is an answer
# the client got whole from it, or one the kill cut after the replica charged it.
replica_a=$(sed -n 's/^replica A \([0-9-]*\) whole \([0-9]*\) cut \([0-9]*\)$/\1/p' "$dir/client.out")
replica_b=$(sed -n 's/^replica B \([0-9-]*\) whole \([0-9]*\) cut \([0-9]*\)$/\1/p' "$dir/client.out")
whole_a=$(sed -n 's/^replica A [0-9-]* whole \([0-9]*\) cut [0-9]*$/\1/p' "$dir/client.out")
cut_a=$(sed -n 's/^replica A [0-9-]* whole [0-9]* cut \([0-9]*\)$/\1/p' "$dir/client.out")
whole_b=$(sed -n 's/^replica B [0-9-]* whole \([0-9]*\) cut [0-9]*$/\1/p' "$dir/client.out")
[ -n "$replica_a" ] && [ -n "$replica_b" ] || fail "the client did not name the replicas"
charged() { pg_sql herd "SELECT count(*) FROM transfers WHERE key LIKE 'request:$1-%'"; }
charged_a=$(charged "$replica_a")
charged_b=$(charged "$replica_b")
total=$(pg_sql herd "SELECT count(*) FROM transfers WHERE key LIKE 'request:%'")
echo "ledger: $total request transfers: replica A $charged_a (answers whole $whole_a, cut by" \
  "the kill $cut_a), replica B $charged_b (answers whole $whole_b)"
[ "$total" = $((charged_a + charged_b)) ] || fail "transfers of neither replica"
[ "$charged_b" = "$whole_b" ] || fail "replica B charged $charged_b requests, answered $whole_b whole"
# A charges a request before its answer's last bytes leave: the kill may cut an answer it
# had charged (the client paid for an answer it did not get whole). Never more than it cut.
extra=$((charged_a - whole_a))
[ "$extra" -ge 0 ] && [ "$extra" -le "$cut_a" ] ||
  fail "replica A charged $charged_a requests, answered $whole_a whole and cut $cut_a"
echo "ledger: requests charged but cut by the kill: $extra"
# The pods' records (pod_records) are shared: both replicas added to the same rows, one per
# pod that served (the router may send one pod everything), every request counted once; a
# replica counts a request just after charging it, so the kill may leave uncounted what A
# had in flight (at most one request per client worker: 4).
counted=$(pg_sql herd "SELECT coalesce(sum(requests), 0) FROM pod_records")
rows=$(pg_sql herd "SELECT count(*) FROM pod_records")
echo "pod_records: $rows pods, $counted requests counted"
[ "$rows" -ge 1 ] && [ "$rows" -le 2 ] || fail "pod_records holds $rows pods of 2"
[ "$counted" -le "$total" ] && [ "$counted" -ge $((total - 4)) ] ||
  fail "pod_records counted $counted requests of $total charged"

# The killed replica again, on its port and the same database: the pods' next heartbeats
# register them with it (the client waits for both), its books are consistent, and it serves.
port_a=${url_a##*:}
hub hub-a-again "$port_a"
[ "$(hub_url hub-a-again)" = "$url_a" ] || fail "the replica did not restart on $url_a"
HERD_HUB_URLS="$url_a $url_b" HERD_API_KEY=replica-key HERD_OPERATOR_KEY=operator-key HERD_AFTER_RESTART=1 \
  node "$here/node/hub_replicas_test.mjs" || fail "the restarted replica"
echo PASS
