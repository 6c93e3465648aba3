#!/usr/bin/env bash
# End to end: links measured and shaped. Two `herd node`s, each in its own network
# namespace, joined to the coordinator's by veth pairs and a bridge; every veth end's
# egress limited by tbf (bandwidth), and every frame made late by herd's test-only delay
# (--test-link-delay-us: the kernel has no netem). Two link profiles: 1 Gbit/s with 300 us
# one way, and 10 Gbit/s with 50 us. For each:
#   - `herd plan --peers ... --explain` measures both links: the round trip is at least
#     the two delays, the bandwidth each way no more than tbf allows (and not absurdly
#     below it);
#   - tensor parallelism is predicted to decode slower than a pipeline on the slow link and
#     faster on the fast one (its all-reduces cost more than they save on the first);
#   - `herd bench` runs both plans and prints the measured decode beside the prediction
#     (figures for docs/performance.md, not asserted: the machine is shared).
# The script re-runs itself in new network and mount namespaces (unshare -n -m): nothing
# it makes is seen outside, and nothing leaves the machine. Needs root, unshare, ip and tc
# (scripts/install-deps): where one is missing it skips (exit 77), or under CI=true fails
# (tests/requires.sh). On macOS it does not apply and skips. About 60 s.
# Usage: links_e2e_test.sh path/to/herd
set -euo pipefail
herd=${1:?usage: links_e2e_test.sh path/to/herd}
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")

if [ -z "${HERD_LINKS_NS:-}" ]; then
  source "$(dirname "$0")/requires.sh"
  require_linux "its network namespaces"
  require_tools unshare ip tc
  require_root "its network namespaces"
  HERD_LINKS_NS=1 exec unshare --net --mount "$BASH" "$0" "$herd"
fi

# ---- inside the namespaces ----------------------------------------------------------------
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache
export HERD_KEY=5f3c0e8a9b1d2c4e6f708192a3b4c5d6  # nodes off loopback need a key
cleanup_more() { for ns in n1 n2; do ip netns del "$ns" 2>/dev/null || true; done; }
source "$(dirname "$0")/node_lib.sh"

mount -t tmpfs tmpfs /run  # ip netns keeps its mounts here: this test's own
ip link set lo up
ip link add br0 type bridge
ip addr add 10.77.0.1/24 dev br0
ip link set br0 up
for i in 1 2; do
  ip netns add "n$i"
  ip link add "veth$i" type veth peer name eth0 netns "n$i"
  ip link set "veth$i" master br0 up
  ip -n "n$i" addr add "10.77.0.$((i + 1))/24" dev eth0
  ip -n "n$i" link set eth0 up
  ip -n "n$i" link set lo up
done

# tbf on the egress of both ends of each veth: to the node and from it.
shape() {
  local rate=$1 burst=$2 i
  for i in 1 2; do
    tc qdisc replace dev "veth$i" root tbf rate "$rate" burst "$burst" latency 100ms
    ip netns exec "n$i" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  done
}

model=$dir/model.gguf
# Small enough that its weights take about as long a token as its all-reduces on the slow
# link: the link decides (as with the smaller model of src/plan/predict_test.cpp). Measured
# (HERD_LINKS_MEASURED): 16 layers of 1024, 215 MB, so that a stage's weights do not fit in
# the last-level cache (a 29 MB stage of the small one in a 32 MB L3 decodes 1.7x faster than
# memory bandwidth says, which no profile of the node predicts).
shape_flags=(--layers 8 --embd 768 --heads 12)
[ -n "${HERD_LINKS_MEASURED:-}" ] && shape_flags=(--layers 16 --embd 1024 --heads 16)
"$herd" synth --arch llama "${shape_flags[@]}" --type q8_0 --out "$model" >/dev/null 2>&1 ||
  fail "synth"

# Node profiles say 6 GB/s, so that the choices checked below do not depend on this
# machine's memory; HERD_LINKS_MEASURED=1 lets the nodes measure it instead and checks no
# choice (for the figures of docs/performance.md "Links and predictions").
bandwidth=(--bandwidth 6)
[ -n "${HERD_LINKS_MEASURED:-}" ] && bandwidth=()

# profile name, tbf rate, its Gbit/s, burst, one-way delay in us, the plan that should win
for profile in "slow 1gbit 1 256kb 300 pipeline" "fast 10gbit 10 2mb 50 tensor"; do
  read -r name rate gbits burst delay winner <<<"$profile"
  shape "$rate" "$burst"
  # One after the other: a node measures its memory bandwidth as it starts, and two
  # measuring at once on one machine would each see half.
  for i in 1 2; do
    ip netns exec "n$i" "$herd" node --listen "10.77.0.$((i + 1)):7000" --threads 1 \
      --name "n$i" "${bandwidth[@]}" --no-advertise --test-link-delay-us "$delay" \
      2>"$dir/$name-n$i.log" &
    for _ in $(seq 200); do
      grep -q "listening on" "$dir/$name-n$i.log" && break
      sleep 0.05
    done
    grep -q "listening on" "$dir/$name-n$i.log" || fail "node n$i ($name) did not start"
  done
  peers=10.77.0.2:7000,10.77.0.3:7000
  common=(--peers "$peers" --no-local --test-link-delay-us "$delay")

  "$herd" plan -m "$model" "${common[@]}" "${bandwidth[@]}" --explain >"$dir/$name-plan.txt" \
    2>&1 || fail "herd plan ($name): $(cat "$dir/$name-plan.txt")"
  # "link to n1           0.65 ms round trip, 0.95 / 0.94 Gbit/s"
  while read -r _ _ node rtt _ _ _ send _ receive _; do
    awk -v rtt="$rtt" -v send="$send" -v receive="$receive" -v delay="$delay" -v gbits="$gbits" '
      BEGIN {
        ok = rtt * 1000 >= 2 * delay && send <= 1.3 * gbits && receive <= 1.3 * gbits &&
             send >= 0.01 * gbits && receive >= 0.01 * gbits
        exit !ok
      }' || fail "$name: link to $node measured $rtt ms, $send / $receive Gbit/s" \
      "(delay $delay us each way, tbf $gbits Gbit/s)"
    echo "ok: $name link to $node: $rtt ms round trip, $send / $receive Gbit/s (tbf $gbits Gbit/s, $delay us each way)"
  done < <(grep "^link to" "$dir/$name-plan.txt")
  [ "$(grep -c "^link to" "$dir/$name-plan.txt")" -eq 2 ] || fail "$name: two links not shown"
  # The link between the two nodes, which n1 measured by dialling n2 (PEER_PROBE): over the
  # bridge, through both shaped veths, each node delaying what it sends.
  read -r _ _ _ _ rtt _ _ _ send _ receive _ < <(grep "^link n1 - n2 " "$dir/$name-plan.txt") ||
    fail "$name: the link between the nodes is not shown: $(cat "$dir/$name-plan.txt")"
  awk -v rtt="$rtt" -v send="$send" -v receive="$receive" -v delay="$delay" -v gbits="$gbits" '
    BEGIN { exit !(rtt * 1000 >= 2 * delay && send <= 1.3 * gbits && receive <= 1.3 * gbits &&
                   send >= 0.01 * gbits && receive >= 0.01 * gbits) }' ||
    fail "$name: link n1 - n2 measured $rtt ms, $send / $receive Gbit/s"
  echo "ok: $name link n1 - n2: $rtt ms round trip, $send / $receive Gbit/s"
  # Decode as predicted for the two-node pipeline and tensor pair ("  2. tensor of 'n1',
  # 'n2'   85.4 tok/s decode (...").
  decode_of() { grep -E "^ *[0-9]+\. $1 of 'n1', 'n2' " "$dir/$name-plan.txt" |
    sed -E "s/.*'n2' +([0-9.]+) tok\/s decode.*/\1/"; }
  pipeline_tps=$(decode_of pipeline)
  tensor_tps=$(decode_of tensor)
  [ -n "$pipeline_tps" ] && [ -n "$tensor_tps" ] || fail "$name: no predictions: $(cat "$dir/$name-plan.txt")"
  if [ "$winner" = tensor ]; then faster=$tensor_tps slower=$pipeline_tps; else faster=$pipeline_tps slower=$tensor_tps; fi
  [ -n "${HERD_LINKS_MEASURED:-}" ] || awk -v a="$faster" -v b="$slower" 'BEGIN { exit !(a > b) }' ||
    fail "$name: expected $winner to decode faster: pipeline $pipeline_tps, tensor $tensor_tps tok/s predicted"
  echo "ok: $name: predicted decode: pipeline $pipeline_tps, tensor $tensor_tps tok/s"
  echo "$name: $(grep "^fastest predicted:" "$dir/$name-plan.txt")"
  # --parallel auto runs the fastest predicted candidate, the first listed.
  grep -E "^ *1\. .*<- the plan above" "$dir/$name-plan.txt" >/dev/null ||
    fail "$name: auto did not choose the fastest predicted: $(cat "$dir/$name-plan.txt")"

  # Measured beside predicted; tensor parallel also with its all-reduces in q8_0 (f32's
  # bytes / 3.76). HERD_LINKS_PROMPT: a longer prompt for prefill figures (docs/performance.md).
  for run in pipeline:f32 tensor:f32 tensor:q8_0; do
    parallel=${run%:*} wire=${run#*:}
    "$herd" bench -m "$model" "${common[@]}" --parallel "$parallel" --wire-dtype "$wire" \
      -p "${HERD_LINKS_PROMPT:-32}" -n 16 -t 1 >"$dir/$name-$parallel.txt" 2>&1 ||
      fail "bench $name $run: $(cat "$dir/$name-$parallel.txt")"
    grep -qE '^predicted' "$dir/$name-$parallel.txt" || fail "bench $name $run: no prediction"
    echo "$name $run: $(grep -E '^(prefill|decode)' "$dir/$name-$parallel.txt" | tr '\n' ' ')"
    echo "$name $run: $(grep -E '^predicted' "$dir/$name-$parallel.txt")"
  done
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
done
echo "PASS"
