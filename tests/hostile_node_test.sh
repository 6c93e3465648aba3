#!/usr/bin/env bash
# A flood of half-open HELLOs cannot keep a keyed `herd node`'s own coordinator out: two
# nodes with a cluster key, each held by 24 connections that send part of a HELLO and stall
# (and 5 more a second, so the slots stay full as they turn over); a
# coordinator (herd run --peers, a pipeline of 2, so a stage link between the nodes has to
# get in too) forms its pod and answers as one process does. The nodes evict half-open
# handshakes rather than refuse the newcomer (docs/protocol.md, "Handshake slots"), stay up,
# and their memory and threads stay bounded. About 8 s.
set -euo pipefail
herd=${1:?usage: hostile_node_test.sh path/to/herd}
command -v timeout >/dev/null || timeout() { gtimeout "$@"; }
source "$(dirname "$0")/requires.sh"
require_tools python3  # the flood (hostile_node_flood.py)
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache XDG_CONFIG_HOME=$dir/config
unset HERD_KEY
source "$(dirname "$0")/node_lib.sh"
start=$SECONDS

rss_kib() { ps -o rss= -p "$1" | tr -d ' '; }
threads() { [ -r "/proc/$1/status" ] && awk '/^Threads:/ {print $2}' "/proc/$1/status" || echo 0; }

# 5 layers, so that a pipeline of 2 uses both nodes whatever the planner measures.
model=$dir/synth5.gguf
"$herd" synth --arch llama --layers 5 --embd 64 --ff 512 --heads 4 --kv-heads 2 --ctx 512 \
  --type q4_0 --out "$model" >/dev/null 2>&1 || fail "synth"
run_greedy() {  # run_greedy <out> [options...]
  local out=$1
  shift
  timeout 60 "$herd" run --model "$model" --prompt "hostile herd" -n 24 --temp 0 --threads 1 \
    "$@" >"$out" 2>"$dir/coordinator.err" || fail "run $*: $(cat "$dir/coordinator.err")"
}
run_greedy "$dir/reference.txt"
[ -s "$dir/reference.txt" ] || fail "the reference run printed nothing"

printf '%s\n' 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef >"$dir/key"
start_node n1 --key "$dir/key"
start_node n2 --key "$dir/key"
wait_nodes n1 n2
declare -A rss0 threads0
for n in n1 n2; do
  rss0[$n]=$(rss_kib "${pid_of[$n]}")
  threads0[$n]=$(threads "${pid_of[$n]}")
done

python3 "$(dirname "$0")/hostile_node_flood.py" 24 5 "${addr[n1]##*:}" "${addr[n2]##*:}" \
  >"$dir/flood.log" 2>&1 &
flood=$!
for _ in $(seq 200); do
  grep -qs flooding "$dir/flood.log" && break
  kill -0 "$flood" 2>/dev/null || fail "the flood ended: $(cat "$dir/flood.log")"
  sleep 0.05
done
grep -q flooding "$dir/flood.log" || fail "the flood did not start"
sleep 1  # past the first evictions: the 8 slots of 127.0.0.1 (of 16) are the flood's
declare -A rss_flooded
for n in n1 n2; do
  rss_flooded[$n]=$(rss_kib "${pid_of[$n]}")
  # The flood alone: its handshake threads and buffers, nothing that grows with it.
  [ "${rss_flooded[$n]}" -le $((rss0[$n] + 32 * 1024)) ] ||
    fail "node $n: RSS grew from ${rss0[$n]} to ${rss_flooded[$n]} KiB under the flood"
done

t0=$SECONDS
run_greedy "$dir/flooded.txt" --peers "${addr[n1]},${addr[n2]}" --no-local --parallel pipeline:2 \
  --key "$dir/key"
cmp -s "$dir/reference.txt" "$dir/flooded.txt" ||
  fail "the flooded pod's answer differs: '$(cat "$dir/flooded.txt")'," \
    "one process's: '$(cat "$dir/reference.txt")'"
echo "hostile_node: the pod formed and answered under the flood in $((SECONDS - t0)) s"

declare -A rss_run
for n in n1 n2; do
  grep -q "loaded layers" "$dir/$n.log" || fail "node $n holds no stage"
  rss_run[$n]=$(rss_kib "${pid_of[$n]}")
done
# The flood goes on (each connection evicted by the 8th after it): nothing accumulates.
sleep 3
for n in n1 n2; do
  kill -0 "${pid_of[$n]}" 2>/dev/null || fail "node $n died"
  evicted=$(grep -c "handshake slots were full" "$dir/$n.log" || true)
  [ "$evicted" -ge 16 ] || fail "node $n evicted $evicted half-open handshakes, expected >= 16"
  # Handshake threads are bounded (2 x 16 slots).
  t=$(threads "${pid_of[$n]}")
  [ "$t" -le $((threads0[$n] + 40)) ] || fail "node $n: $t threads (${threads0[$n]} before)"
  rss=$(rss_kib "${pid_of[$n]}")
  echo "hostile_node: $n: $evicted evicted; RSS ${rss0[$n]} KiB at start, ${rss_flooded[$n]}" \
    "flooded, ${rss_run[$n]} after the run (its model), $rss 3 s later; threads" \
    "${threads0[$n]} -> $t"
  [ "$rss" -le $((rss_run[$n] + 16 * 1024)) ] ||
    fail "node $n: RSS grew from ${rss_run[$n]} to $rss KiB under the flood after the run"
done
kill -TERM "$flood"
wait "$flood" || true
cat "$dir/flood.log"
echo "hostile_node: ok ($((SECONDS - start)) s)"
