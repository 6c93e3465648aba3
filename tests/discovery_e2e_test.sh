#!/usr/bin/env bash
# End to end: LAN discovery (DNS-SD, net/discovery.h) with a real avahi-daemon, confined to
# this test: the script re-runs itself in new network and mount namespaces (unshare -n -m),
# where only a loopback exists (up, multicast switched on as on a real interface) and
# nothing can leave the machine; a private tmpfs on /run keeps avahi's pid file and socket apart from
# the host's and from a parallel run; the test's own dbus-daemon is the system bus that
# avahi-daemon and herd talk over (DBUS_SYSTEM_BUS_ADDRESS).
# Usage: discovery_e2e_test.sh path/to/herd [three|sixteen]
#   three:   3 nodes of one key and 1 of another: `herd nodes` lists exactly the 3 with
#            their profiles; `herd run --peers auto` prints what named peers print; the
#            nodes' records then list the model they were sent; a killed node drops out
#            within seconds; without the daemon, `herd nodes` and
#            `--peers auto` say so, `herd node` warns and runs, named peers still work.
#   sixteen: 16 nodes; `herd nodes` and `--peers auto` (herd plan) find all 16; then
#            cluster_sixteen_test.py --peers-auto: 16 more form pods by discovery, and each
#            loses two nodes mid-answer.
# Needs root (namespaces), unshare, ip, dbus-daemon, avahi-daemon and python3
# (scripts/install-deps): where one is missing it skips (exit 77), or under CI=true fails
# (tests/requires.sh). On macOS it does not apply and skips. About 10 s each.
set -euo pipefail
herd=${1:?usage: discovery_e2e_test.sh path/to/herd [three|sixteen]}
mode=${2:-three}
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")

if [ -z "${HERD_DISCOVERY_NS:-}" ]; then
  source "$(dirname "$0")/requires.sh"
  require_linux "its network namespace"
  require_tools unshare ip dbus-daemon avahi-daemon python3
  require_root "its network namespace"
  HERD_DISCOVERY_NS=1 exec unshare --net --mount "$BASH" "$0" "$herd" "$mode"
fi

# ---- inside the namespaces ----------------------------------------------------------------
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache
export XDG_CONFIG_HOME=$dir/config  # node identities (made on first use); never the user's
unset HERD_KEY
cleanup_more() { [ -f "$dir/dbus.pid" ] && kill "$(cat "$dir/dbus.pid")" 2>/dev/null || true; }
node_ready_pattern="advertised\|not advertised"  # wait_nodes: until it has tried to advertise
source "$(dirname "$0")/node_lib.sh"

ip link set lo up
ip link set lo multicast on
mount -t tmpfs tmpfs /run
mkdir -p /run/avahi-daemon

cat >"$dir/dbus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
cat >"$dir/avahi.conf" <<EOF
[server]
use-ipv4=yes
use-ipv6=no
allow-interfaces=lo
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
EOF
dbus-daemon --config-file="$dir/dbus.conf" --fork --print-pid >"$dir/dbus.pid" ||
  fail "dbus-daemon did not start"
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$dir/bus
avahi_pid=
start_avahi() {
  avahi-daemon -f "$dir/avahi.conf" --no-chroot --no-drop-root --no-rlimits --no-proc-title \
    >"$dir/avahi.log" 2>&1 &
  avahi_pid=$!
  for _ in $(seq 100); do
    grep -q "Server startup complete" "$dir/avahi.log" && return
    kill -0 "$avahi_pid" 2>/dev/null || fail "avahi-daemon exited"
    sleep 0.05
  done
  fail "avahi-daemon did not start"
}
stop_avahi() {
  kill -TERM "$avahi_pid"
  wait "$avahi_pid" 2>/dev/null || true
}

# names <herd nodes args...>: the node names `herd nodes --json` lists, sorted, one line.
names() {
  "$herd" nodes --json --discover-ms 700 "$@" 2>"$dir/nodes.err" >"$dir/nodes.json" ||
    fail "herd nodes $*: $(cat "$dir/nodes.err")"
  python3 -c 'import json,sys; print(" ".join(sorted(n["name"] for n in json.load(open(sys.argv[1])))))' \
    "$dir/nodes.json"
}
# wait_names <expected> <herd nodes args...>: until `herd nodes` lists exactly those (8 s).
wait_names() {
  local want=$1 got=
  shift
  for _ in $(seq 10); do
    got=$(names "$@")
    [ "$got" = "$want" ] && return
  done
  fail "herd nodes $*: listed '$got', expected '$want'"
}
expect_fail() {  # expect_fail <needle> <herd args...>
  local needle=$1 code=0
  shift
  timeout 30 "$herd" "$@" >/dev/null 2>"$dir/err.txt" || code=$?
  [ "$code" -ne 0 ] || fail "herd $* succeeded, expected '$needle'"
  grep -q -- "$needle" "$dir/err.txt" || fail "herd $*: expected '$needle' in: $(cat "$dir/err.txt")"
  echo "discovery_e2e: expected: $(head -1 "$dir/err.txt")"
}

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/k1"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/k2"
start_avahi

if [ "$mode" = sixteen ]; then
  all=()
  for i in $(seq -w 1 16); do
    start_node "m$i" --bandwidth 10 --key "$dir/k1"
    all+=("m$i")
  done
  wait_nodes "${all[@]}"
  wait_names "${all[*]}" --key "$dir/k1"
  echo "discovery_e2e: herd nodes lists all 16"
  model=$dir/tiny.gguf
  "$herd" synth --arch llama --layers 16 --embd 64 --ff 128 --heads 4 --kv-heads 2 --type f16 \
    --out "$model" >/dev/null 2>&1 || fail "synth"
  "$herd" plan --model "$model" --peers auto --key "$dir/k1" --discover-ms 1000 --json \
    >"$dir/plan.json" 2>"$dir/plan.err" || fail "plan --peers auto: $(cat "$dir/plan.err")"
  grep -q "16 nodes of cluster" "$dir/plan.err" || fail "plan --peers auto: $(cat "$dir/plan.err")"
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["nodes"]))' "$dir/plan.json")
  [ "$n" = 17 ] || fail "plan --peers auto: $n nodes (expected this one and 16)"
  echo "discovery_e2e: --peers auto resolves all 16 (sixteen: ${SECONDS}s)"
  # Sixteen keyless nodes (another cluster than these) found by discovery run a pipeline of
  # 16 and 8 stages x 2 ranks, each losing two nodes mid-answer.
  python3 "$(dirname "$0")/cluster_sixteen_test.py" "$herd" --peers-auto ||
    fail "sixteen nodes by discovery"
  exit 0
fi

# ---- three nodes of cluster k1, one of k2 ---------------------------------------------------
# --no-model-files: the nodes are sent the weights, so their cache (shared here) fills, and
# their TXT records must then list the model.
start_node n1 --bandwidth 10 --key "$dir/k1" --no-model-files
start_node n2 --bandwidth 10 --key "$dir/k1" --no-model-files
start_node n3 --bandwidth 10 --key "$dir/k1" --no-model-files
start_node other --bandwidth 10 --key "$dir/k2"
wait_nodes n1 n2 n3 other
grep -q "advertised on the LAN as 'n1'" "$dir/n1.log" || fail "n1 did not advertise"
wait_names "n1 n2 n3" --key "$dir/k1"
[ "$(names --key "$dir/k2")" = other ] || fail "herd nodes --key k2 did not list only 'other'"
[ "$(names --all)" = "n1 n2 n3 other" ] || fail "herd nodes --all: $(names --all)"
[ -z "$(names)" ] || fail "herd nodes without a key listed keyed nodes"
# Profiles: the bandwidth each was given, its cores, its address; the table names them too.
python3 - "$dir/nodes.json" <<'EOF' || fail "herd nodes --json: bad profiles: $(cat "$dir/nodes.json")"
import json, sys
nodes = json.load(open(sys.argv[1]))
for n in nodes:
    assert n["bandwidth_gbs"] == 10.0 and n["cores"] >= 1 and n["free_memory_bytes"] > 0, n
    assert n["address"].startswith("127.0.0.1:") and len(n["cluster"]) == 16, n
    assert len(n["id"]) == 43, n  # the node's identity, for --allow-ids
EOF
"$herd" nodes --key "$dir/k1" --discover-ms 700 >"$dir/table.txt" 2>&1 || fail "herd nodes table"
for n in n1 n2 n3; do
  grep -q "^$n .*${addr[$n]} .*10.0 GB/s" "$dir/table.txt" || fail "table lacks $n: $(cat "$dir/table.txt")"
done
grep -q "^other" "$dir/table.txt" && fail "table lists the other cluster's node"
echo "discovery_e2e: herd nodes lists n1 n2 n3 (and not the other key's node)"

# --peers auto gives the text named peers give (pipeline, f32 on the wire: exact); --no-local
# so that the nodes hold the layers.
model=$dir/tiny.gguf
"$herd" synth --arch llama --layers 4 --embd 64 --ff 128 --heads 4 --kv-heads 2 --type f16 \
  --out "$model" >/dev/null 2>&1 || fail "synth"
run() {  # run <out> <peers> [options...]
  local out=$1 peers=$2
  shift 2
  "$herd" run --model "$model" --prompt "hello world" -n 8 --temp 0 --threads 1 \
    --parallel pipeline --no-local --peers "$peers" --discover-ms 1000 "$@" >"$out" \
    2>"$dir/run.err" ||
    fail "run --peers $peers: $(cat "$dir/run.err")"
}
named=${addr[n1]},${addr[n2]},${addr[n3]}
run "$dir/named.txt" "$named" --key "$dir/k1"
[ -s "$dir/named.txt" ] || fail "run with named peers printed nothing"
run "$dir/auto.txt" auto --key "$dir/k1"
grep -q "3 nodes of cluster" "$dir/run.err" || fail "run --peers auto: $(cat "$dir/run.err")"
cmp -s "$dir/named.txt" "$dir/auto.txt" || fail "--peers auto printed other text than named peers"
run "$dir/mixed.txt" "auto,${addr[n2]}" --key "$dir/k1"
cmp -s "$dir/named.txt" "$dir/mixed.txt" || fail "--peers auto,<named> printed other text"
echo "discovery_e2e: --peers auto (and auto mixed with a named peer) = named peers"
# The nodes look at their cache every 5 s and update their TXT record.
for _ in $(seq 12); do
  names --key "$dir/k1" >/dev/null
  python3 -c 'import json,sys
nodes = json.load(open(sys.argv[1]))
assert len(nodes) == 3 and all(n["n_models"] == 1 and len(n["models"][0]) == 16 for n in nodes)' \
    "$dir/nodes.json" 2>/dev/null && break
done
python3 -c 'import json,sys; assert all(n["n_models"] == 1 for n in json.load(open(sys.argv[1])))' \
  "$dir/nodes.json" 2>/dev/null || fail "the TXT records do not list the cached model: $(cat "$dir/nodes.json")"
echo "discovery_e2e: the nodes' TXT records list the model they were sent"

# A node that dies (SIGKILL: no goodbye of its own) drops out: avahi withdraws its record.
kill -KILL "${pid_of[n2]}"
wait "${pid_of[n2]}" 2>/dev/null || true
t0=$SECONDS
wait_names "n1 n3" --key "$dir/k1"
echo "discovery_e2e: a killed node dropped out within $((SECONDS - t0 + 1)) s"

# No daemon: clear errors for discovery; nodes still run; named peers still work.
stop_avahi
expect_fail "no mDNS daemon is running" nodes --key "$dir/k1" --discover-ms 300
expect_fail "no mDNS daemon is running" run --model "$model" --prompt hi -n 2 --threads 1 \
  --peers auto --key "$dir/k1"
for _ in $(seq 50); do grep -q "lost the mDNS daemon" "$dir/n1.log" && break; sleep 0.1; done
grep -q "lost the mDNS daemon" "$dir/n1.log" || fail "n1 did not say it lost the daemon"
start_node n4 --bandwidth 10 --key "$dir/k1"
wait_nodes n4
grep -q "no mDNS daemon is running.*not advertised" "$dir/n4.log" || fail "n4 did not warn"
[ "$(grep -c "mDNS" "$dir/n4.log")" = 1 ] || fail "n4 warned more than once"
run "$dir/named2.txt" "${addr[n1]},${addr[n4]}" --key "$dir/k1"
cmp -s "$dir/named.txt" "$dir/named2.txt" || fail "named peers without a daemon: other text"
echo "discovery_e2e: without a daemon discovery says so and named peers work (three: ${SECONDS}s)"
