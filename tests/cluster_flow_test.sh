#!/usr/bin/env bash
# Stage to stage: pipelines of 2, 4 and 8 `herd node` processes on 127.0.0.1 (--no-local:
# every stage on a node) pass hidden states straight from stage to stage. Asserts that
# (a) the logits are identical to one process (f32 on the wire), and close with f16;
# (b) the coordinator's bytes per decoded token (herd bench --json) are the same at 2, 4
# and 8 stages (they do not grow with the stages), and each stage's compute is reported;
# (c) a middle stage that dies is noticed and named, and the answer goes on (recovery).
# Nodes listen on port 0 and the test reads the bound address from their first log lines.
set -euo pipefail
herd=${1:?usage: cluster_flow_test.sh path/to/herd}
command -v timeout >/dev/null || timeout() { gtimeout "$@"; }
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache
export XDG_CONFIG_HOME=$dir/config  # node identities (made on first use); never the user's
unset HERD_KEY

log_lines=8
source "$(dirname "$0")/node_lib.sh"
start=$SECONDS

# 8 layers, so that 8 stages get one each.
model=$dir/synth8.gguf
"$herd" synth --arch llama --layers 8 --embd 256 --ff 384 --heads 4 --kv-heads 2 --ctx 1024 \
  --type q4_0 --out "$model" >/dev/null 2>&1 || fail "synth"
tokens=1,17,42,99,3,250,7,8,9,10,11,12,13,14,15,16
eval_model() {  # eval_model <out> [options...]
  local out=$1
  shift
  "$herd" eval --model "$model" --tokens "$tokens" --dump-logits "$out" --threads 1 "$@" \
    2>"$dir/coordinator.err" >/dev/null || fail "eval $*: $(cat "$dir/coordinator.err")"
}
eval_model "$dir/ref.f32"

names=(f1 f2 f3 f4 f5 f6 f7 f8)
for n in "${names[@]}"; do start_node "$n" --bandwidth 10 --matmul 20; done
wait_nodes "${names[@]}"
peers_of() {  # peers_of <P>: the first P nodes' addresses
  local list="" i
  for ((i = 0; i < $1; i++)); do list+=${list:+,}${addr[${names[$i]}]}; done
  echo "$list"
}
marks() { local n; for n in "${names[@]}"; do echo "$n $(mark "$n")"; done; }
logs_since() {  # logs_since <marks>: every node's log lines after the marks
  local n m
  while read -r n m; do since "$n" "$m"; done <<<"$1"
}

# --- (a) identical logits at 2, 4, 8 stages; every stage after the first gets its input
# from the one before. ------------------------------------------------------------------
for p in 2 4 8; do
  m=$(marks)
  eval_model "$dir/out.f32" --peers "$(peers_of "$p")" --no-local --parallel "pipeline:$p"
  cmp -s "$dir/ref.f32" "$dir/out.f32" || fail "$p stages: logits differ from one process"
  got=$(logs_since "$m")
  loaded=$(grep -c "loaded layers" <<<"$got" || true)
  linked=$(grep -c "input from the previous stage" <<<"$got" || true)
  [ "$loaded" -eq "$p" ] || fail "$p stages: $loaded nodes loaded: $got"
  [ "$linked" -eq $((p - 1)) ] || fail "$p stages: $linked stage links: $got"
  echo "cluster_flow: $p stages: logits identical to one process, $linked stage links"
done
m=$(marks)
eval_model "$dir/f16.f32" --peers "$(peers_of 4)" --no-local --parallel pipeline:4 --wire-dtype f16
python3 - "$dir/ref.f32" "$dir/f16.f32" <<'EOF' || fail "f16 wire: logits not close"
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
assert len(a) == len(b) and len(a) % 4 == 0, "sizes differ"
x = struct.unpack(f"<{len(a) // 4}f", a)
y = struct.unpack(f"<{len(b) // 4}f", b)
diff = max(abs(p - q) for p, q in zip(x, y))
span = max(x) - min(x)
print(f"cluster_flow: 4 stages, f16 wire: max abs diff {diff:.3g}, logit range {span:.3g}")
sys.exit(0 if 0 < diff <= 2e-2 * span else 1)
EOF

# --- (b) the coordinator's bytes per decoded token do not grow with the stages. -----------
declare -A coord
for p in 2 4 8; do
  "$herd" bench --model "$model" --peers "$(peers_of "$p")" --no-local --parallel "pipeline:$p" \
    -p 16 -n 16 -r 1 --threads 1 --json >"$dir/bench$p.json" 2>"$dir/coordinator.err" ||
    fail "bench $p stages: $(cat "$dir/coordinator.err")"
  coord[$p]=$(python3 - "$dir/bench$p.json" "$p" <<'EOF'
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
stages = j["stages"]
assert len(stages) == int(sys.argv[2]), f"{len(stages)} stages"
for i, s in enumerate(stages):
    assert s["decode_compute_ms_per_token"] > 0, f"stage {i}: no compute reported"
    if 0 < i:
        assert s["decode_bytes_sent_per_token"] == 0, f"stage {i}: sent by the coordinator"
        assert s["decode_link_bytes_received_per_token"] > 0, f"stage {i}: no stage link"
print(j["coordinator_bytes_per_token"])
EOF
  ) || fail "bench $p stages: $(cat "$dir/bench$p.json")"
  echo "cluster_flow: $p stages: ${coord[$p]} coordinator bytes per decoded token"
done
# The only growth allowed: the last stage's RESULT carries each earlier stage's compute
# time (8 bytes a stage). Through the coordinator, each further stage would add a FORWARD
# and a RESULT of n_embd floats (over 2 KB here).
python3 - "${coord[2]}" "${coord[4]}" "${coord[8]}" <<'EOF' ||
import sys
b = [float(x) for x in sys.argv[1:]]
flat = [x - 8 * (p - 1) for x, p in zip(b, (2, 4, 8))]
print(f"cluster_flow: less the stage times: {flat}; 8 stages / 2 stages = {b[2] / b[0]:.3f}")
sys.exit(0 if b[0] > 0 and max(flat) == min(flat) and b[2] <= 1.05 * b[0] else 1)
EOF
  fail "coordinator bytes per token grow with the stages: 2: ${coord[2]}, 4: ${coord[4]}, 8: ${coord[8]}"

# --- (c) a middle stage dies mid-decode: the coordinator notices at once, names it, forms
# the pod again on the survivors (docs/cluster.md "When a node dies") and finishes. -------
m=$(marks)
"$herd" bench --model "$model" -p 16 -n 600 -r 10 -c 1024 --threads 1 \
  --peers "$(peers_of 4)" --no-local --parallel pipeline:4 >/dev/null 2>"$dir/coordinator.err" &
run_pid=$!
victim=""
for _ in $(seq 200); do
  while read -r n mk; do
    since "$n" "$mk" | grep -q "input from the previous stage; output to the next stage" &&
      victim=$n && break
  done <<<"$m"
  [ -n "$victim" ] && break
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 0.05
done
[ -n "$victim" ] || fail "no middle stage loaded: $(cat "$dir/coordinator.err") $(logs_since "$m")"
sleep 0.5
kill -0 "$run_pid" 2>/dev/null || fail "the bench ended before the kill: $(cat "$dir/coordinator.err")"
kill -KILL "${pid_of[$victim]}"
code=0
timeout 120 tail --pid="$run_pid" -f /dev/null || true
wait "$run_pid" || code=$?
echo "cluster_flow: SIGKILL $victim (a middle stage): coordinator exited $code:" \
  "$(grep "herd: " "$dir/coordinator.err" | head -3 | tr '\n' ' ')"
[ "$code" -eq 0 ] || fail "the coordinator did not recover from losing $victim: $(cat "$dir/coordinator.err")"
grep -q "lost node.*$victim" "$dir/coordinator.err" ||
  fail "the coordinator did not name $victim: $(cat "$dir/coordinator.err")"
echo "cluster_flow: ok ($((SECONDS - start)) s)"
