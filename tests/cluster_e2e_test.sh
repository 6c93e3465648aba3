#!/usr/bin/env bash
# End to end: real `herd node` processes on 127.0.0.1 and a coordinator (herd eval, run,
# bench, plan) driving them. Pipelines of 2 and 3 nodes (with and without --no-local) give
# logits identical to one process; f16 on the wire stays close and greedy text the same;
# the frontier architectures (deepseek2 MLA + MoE, gemma3, gpt-oss, glm4moe, minimax-m2) in
# pipelines, tensor and expert parallel stages, and shipped to nodes without the file;
# deepseek4 in pipelines;
# weights are shipped to nodes without the file (tensor-parallel ranks only their cuts),
# then read from their caches; cluster keys are enforced both ways; plan names the nodes;
# a mixed pod of a node on a Vulkan device and a CPU node (and a later stage split over a
# node's device and its CPU); garbage on a node's port and a hostile coordinator (cluster_e2e_hostile.py) do not stop
# it serving; a node that stops answering or dies is named by the coordinator, which goes
# on without it; nodes serve again after a dead coordinator or a SIGCONT. About 30 s.
# Nodes listen on port 0 and the test reads the bound address from their first log lines.
set -euo pipefail
herd=${1:?usage: cluster_e2e_test.sh path/to/herd}
# macOS: GNU's timeout comes from Homebrew's coreutils as gtimeout (Brewfile).
command -v timeout >/dev/null || timeout() { gtimeout "$@"; }
file_bytes() { wc -c <"$1" | tr -d ' '; }  # GNU and BSD stat differ; wc does not
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")
models=$(cd "$(dirname "$0")/../../shared/models" && pwd)
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache  # the coordinator's file hashes; never the user's cache
export XDG_CONFIG_HOME=$dir/config  # node identities (made on first use); never the user's
unset HERD_KEY

source "$(dirname "$0")/node_lib.sh"
start=$SECONDS

stop_node() {  # stop_node <name>: SIGTERM, and it must exit by itself
  local pid=${pid_of[$1]}
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && fail "node $1 ignored SIGTERM"
  wait "$pid" 2>/dev/null || true
}
tokens() { tr -s ' \n' ',' <"$1" | sed 's/^,//; s/,$//'; }

# eval_model <model> <out> [options...]: herd eval of the model's first token file.
eval_model() {
  local model=$1 out=$2
  shift 2
  "$herd" eval --model "$model" --tokens "$(tokens "${model%.gguf}.0.tokens")" \
    --dump-logits "$out" --threads 1 "$@" 2>"$dir/coordinator.err" >/dev/null ||
    fail "eval $(basename "$model") $*: $(cat "$dir/coordinator.err")"
}
# expect_fail <needle regex> <herd args...>: exits non-zero with herd: error: and the needle.
expect_fail() {
  local needle=$1 code=0
  shift
  timeout 30 "$herd" "$@" >/dev/null 2>"$dir/coordinator.err" || code=$?
  [ "$code" -ne 0 ] || fail "herd $* succeeded, expected an error matching '$needle'"
  [ "$code" -ne 124 ] || fail "herd $* hung"
  grep -q "herd: error:" "$dir/coordinator.err" || fail "herd $*: no 'herd: error:' in: $(cat "$dir/coordinator.err")"
  grep -Eqi -- "$needle" "$dir/coordinator.err" ||
    fail "herd $*: expected '$needle' in: $(cat "$dir/coordinator.err")"
  echo "cluster_e2e: expected: $(grep "herd: error:" "$dir/coordinator.err")"
}

# A 5-layer model, so that 3 stages split it unevenly, with a context for long runs.
synth=$dir/synth5.gguf
"$herd" synth --arch llama --layers 5 --embd 64 --ff 512 --heads 4 --kv-heads 2 --ctx 8192 \
  --type q4_0 --out "$synth" >/dev/null 2>&1 || fail "synth"
printf '1 17 42 99 3 250 7 8 9 10 11 12 13 14 15 16\n' >"${synth%.gguf}.0.tokens"

start_node n1
start_node n2
start_node n3
wait_nodes n1 n2 n3
peers2=${addr[n1]},${addr[n2]}
peers3=${addr[n1]},${addr[n2]},${addr[n3]}

# --- Pipelines: byte-identical logits to one process. -------------------------------------
# The planner sizes stages by each node's measured bandwidth and may leave a node out (for
# 2-layer models under load it sometimes does), so the shared models only check the logits
# and that --no-local used a node; the 5-layer model, whose layers outweigh its head, must
# use every node: 2 stages over 2 nodes, an uneven 3 over 3.
multi=0 cases=0
for m in llama-q4_0 llama-q4_k_m qwen3-f16 qwen3moe-f16 synth5; do
  model=$models/$m.gguf
  [ "$m" = synth5 ] && model=$synth
  eval_model "$model" "$dir/ref-$m.f32"
  for case in "$peers2 --no-local 2" "$peers2 local 3" "$peers3 --no-local 3" "$peers3 local 4"; do
    read -r peers nl p <<<"$case"
    [ "$nl" = local ] && nl=""
    m1=$(mark n1) m2=$(mark n2) m3=$(mark n3)
    eval_model "$model" "$dir/out.f32" --peers "$peers" --parallel "pipeline:$p" $nl
    cmp -s "$dir/ref-$m.f32" "$dir/out.f32" || fail "$m --peers $peers $nl: logits differ"
    ranges=$( { since n1 "$m1"; since n2 "$m2"; since n3 "$m3"; } |
      grep -o "loaded layers \[[0-9]*, [0-9]*)" | grep -o "[0-9]*, [0-9]*" | sort -n || true)
    loaded=$(grep -c . <<<"$ranges" || true)
    cases=$((cases + 1))
    [ "$loaded" -ge 2 ] && multi=$((multi + 1))
    [ -z "$nl" ] || [ "$loaded" -ge 1 ] || fail "$m --peers $peers --no-local: no node loaded"
    [ "$m" = synth5 ] && [ -n "$nl" ] || continue
    [ "$loaded" -eq "$p" ] || fail "synth5 over $p nodes: stages: $ranges"
    covered=$(awk -F', ' '$1 != end {end = -1} end >= 0 {end = $2} END {print end}' <<<"$ranges")
    [ "$covered" = 5 ] || fail "synth5 over $p nodes: stages do not cover [0, 5): $ranges"
    if [ "$p" = 3 ]; then
      sizes=$(awk -F', ' '{print $2 - $1}' <<<"$ranges" | sort -u | wc -l)
      [ "$sizes" -gt 1 ] || fail "synth5 over 3 nodes: an even split: $ranges"
    fi
  done
done
echo "cluster_e2e: $cases pipelines identical to one process ($multi across 2 or 3 nodes)"
echo "cluster_e2e: pipelines ok ($((SECONDS - start)) s)"

# close_logits <reference.f32> <got.f32> <what>: max |difference| within 1e-3 of the range.
close_logits() {
  python3 - "$1" "$2" "$3" <<'EOF2' || fail "$3: logits not close"
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
assert len(a) == len(b) and len(a) % 4 == 0, "sizes differ"
x = struct.unpack(f"<{len(a) // 4}f", a)
y = struct.unpack(f"<{len(b) // 4}f", b)
diff = max(abs(p - q) for p, q in zip(x, y))
span = max(x) - min(x)
print(f"cluster_e2e: {sys.argv[3]}: max abs diff {diff:.3g}, logit range {span:.3g}")
sys.exit(0 if diff <= 1e-3 * span else 1)
EOF2
}

# --- f16 on the wire: close logits, the same greedy text. -----------------------------------
# On a 5-layer f16 model (so that the planner splits it in 2 stages and hidden states cross
# the wire): with q4 weights the activations are re-quantized to q8 blocks, and the f16
# rounding of the hidden state moves some of them by a q8 step (logits then differ by ~1%).
f16model=$dir/synth5-f16.gguf
"$herd" synth --arch qwen3 --layers 5 --embd 64 --ff 512 --heads 4 --kv-heads 2 --type f16 \
  --out "$f16model" >/dev/null 2>&1 || fail "synth f16"
cp "${synth%.gguf}.0.tokens" "${f16model%.gguf}.0.tokens"
eval_model "$f16model" "$dir/ref.f32"
m1=$(mark n1) m2=$(mark n2)
eval_model "$f16model" "$dir/f16.f32" --peers "$peers2" --no-local --parallel pipeline:2 \
  --wire-dtype f16
since n1 "$m1" | grep -q "loaded layers" && since n2 "$m2" | grep -q "loaded layers" ||
  fail "f16 wire: not split over 2 nodes: $(since n1 "$m1") $(since n2 "$m2")"
cmp -s "$dir/ref.f32" "$dir/f16.f32" && fail "f16 wire: logits identical to f32 (f16 not used?)"
close_logits "$dir/ref.f32" "$dir/f16.f32" "f16 wire"
run_greedy() {  # run_greedy <out> [options...]
  local out=$1
  shift
  "$herd" run --model "$f16model" --prompt "hello world" -n 40 --temp 0 --threads 1 "$@" \
    >"$out" 2>"$dir/coordinator.err" || fail "run $*: $(cat "$dir/coordinator.err")"
}
run_greedy "$dir/run_ref.txt"
[ -s "$dir/run_ref.txt" ] || fail "greedy run printed nothing"
run_greedy "$dir/run_f16.txt" --peers "$peers2" --no-local --parallel pipeline:2 --wire-dtype f16
cmp -s "$dir/run_ref.txt" "$dir/run_f16.txt" || fail "f16 wire: greedy text differs"
run_greedy "$dir/run_f16.txt" --peers "$peers2" --parallel pipeline:3 --wire-dtype f16
cmp -s "$dir/run_ref.txt" "$dir/run_f16.txt" || fail "f16 wire (local + 2): greedy text differs"

# --- q8_0 on the wire: hidden states between stages and the all-reduces of tensor-parallel
# ranks as 8-bit blocks. Checked against one process with the shared models' tolerances for
# quantized types (../shared/models/README.md: per row max |x - ref| / max(1, max |ref|) at
# most 0.1, its mean at most 0.05, a different argmax only for a near-tie).
quantized_logits() {  # quantized_logits <reference.f32> <got.f32> <tokens file> <what>
  python3 - "$@" <<'EOF2' || fail "$4: logits beyond the quantized tolerances"
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
n_rows, what = len(open(sys.argv[3]).read().split()), sys.argv[4]  # a row per token
n_vocab = len(a) // 4 // n_rows
assert len(a) == len(b) and len(a) == 4 * n_vocab * n_rows, "sizes differ"
x = struct.unpack(f"<{len(a) // 4}f", a)
y = struct.unpack(f"<{len(b) // 4}f", b)
errs, near_ties_ok = [], True
for r in range(len(x) // n_vocab):
    ref, got = x[r * n_vocab:(r + 1) * n_vocab], y[r * n_vocab:(r + 1) * n_vocab]
    scale = max(1.0, max(abs(v) for v in ref))
    errs.append(max(abs(p - q) for p, q in zip(ref, got)) / scale)
    top = max(range(n_vocab), key=lambda j: got[j])
    near_ties_ok &= ref[top] >= max(ref) - 2 * 0.1 * scale
worst, mean = max(errs), sum(errs) / len(errs)
print(f"cluster_e2e: {what}: max err {worst:.3g}, mean {mean:.3g} over {len(errs)} rows")
sys.exit(0 if worst <= 0.1 and mean <= 0.05 and near_ties_ok and worst > 0 else 1)
EOF2
}
# (Pipelines of 5-layer models: a 2-layer one may be left on one node under load.)
cp "$dir/ref.f32" "$dir/ref-synth5-f16.f32"
for case in "$synth pipeline:2" "$models/llama-q4_0.gguf tensor" "$f16model pipeline:2" \
  "$f16model tensor"; do
  read -r model how <<<"$case"
  m=$(basename "$model" .gguf)
  m1=$(mark n1) m2=$(mark n2)
  eval_model "$model" "$dir/q8.f32" --peers "$peers2" --no-local --parallel "$how" \
    --wire-dtype q8_0
  since n1 "$m1" | grep -q "loaded layers" && since n2 "$m2" | grep -q "loaded layers" ||
    fail "q8_0 wire $m $how: not on both nodes: $(since n1 "$m1") $(since n2 "$m2")"
  quantized_logits "$dir/ref-$m.f32" "$dir/q8.f32" "${model%.gguf}.0.tokens" \
    "q8_0 wire, $m, $how"
done

# --- A mixed pod: one node computes on a Vulkan device (lavapipe here: Mesa's CPU driver),
# the other on its CPU; the stages' logits within the quantized tolerances of one process
# (the device's f32 activations against the CPU's rounded ones), and the device node says it
# ran its layers there.
if "$herd" devices --device vulkan >/dev/null 2>&1; then
  start_node nv --device vulkan
  # Its stage over its GPU and its CPU, as a pod node whose GPU is too small runs it: forced
  # (lavapipe's memory holds any stage here). Fast-reported, so that it gets the later stage's
  # most layers: its first on the device, the rest and the head on the CPU.
  start_node nvsplit --device vulkan --device-layers 1 --bandwidth 1000 --matmul 1000
  wait_nodes nv nvsplit
  eval_model "$f16model" "$dir/ref-mixed.f32"
  mv=$(mark nv) m1=$(mark n1)
  eval_model "$f16model" "$dir/mixed.f32" --peers "${addr[nv]},${addr[n1]}" --no-local \
    --parallel pipeline:2
  since nv "$mv" | grep -q "layers on vulkan:" ||
    fail "mixed pod: the Vulkan node did not run its layers on its device"
  since n1 "$m1" | grep -q "loaded layers" || fail "mixed pod: the CPU node ran no stage"
  quantized_logits "$dir/ref-mixed.f32" "$dir/mixed.f32" "${f16model%.gguf}.0.tokens" \
    "mixed pod (a Vulkan node and a CPU node)"
  ms=$(mark nvsplit)
  eval_model "$f16model" "$dir/mixed-split.f32" --peers "${addr[n1]},${addr[nvsplit]}" \
    --no-local --parallel pipeline:2
  since nvsplit "$ms" | grep -q "layers on vulkan:.*: layers [0-9]*-[0-9]*; the rest on the CPU" ||
    fail "mixed pod: the Vulkan node's stage was not split over its device and its CPU"
  quantized_logits "$dir/ref-mixed.f32" "$dir/mixed-split.f32" "${f16model%.gguf}.0.tokens" \
    "mixed pod (a later stage's first layer on a Vulkan device, the rest on its CPU)"
  stop_node nv
  stop_node nvsplit
elif [ "${CI:-}" = true ]; then
  fail "no Vulkan device for the mixed pod (CI=true: a missing dependency fails, it does not skip)"
else
  echo "cluster_e2e: SKIP the mixed pod: no Vulkan device (scripts/install-deps installs lavapipe)"
fi

# --- Tensor parallelism: 2 node ranks, then 3 ranks with this process as one of them. -------
# Partial sums are added in another order than one process adds them: close, not identical.
for ranks in "--no-local" ""; do
  m1=$(mark n1) m2=$(mark n2)
  eval_model "$f16model" "$dir/tp.f32" --peers "$peers2" $ranks --parallel tensor
  since n1 "$m1" | grep -q "loaded layers" && since n2 "$m2" | grep -q "loaded layers" ||
    fail "tensor ($ranks): not on both nodes: $(since n1 "$m1") $(since n2 "$m2")"
  close_logits "$dir/ref.f32" "$dir/tp.f32" "tensor parallel ($ranks)"
  run_greedy "$dir/run_tp.txt" --peers "$peers2" $ranks --parallel tensor
  cmp -s "$dir/run_ref.txt" "$dir/run_tp.txt" || fail "tensor ($ranks): greedy text differs"
done

# --- plan asks the running nodes for their profiles. ---------------------------------------
"$herd" plan --model "$synth" --peers "$peers3" --no-local --parallel pipeline \
  >"$dir/plan.txt" 2>"$dir/coordinator.err" || fail "plan: $(cat "$dir/coordinator.err")"
for n in n1 n2 n3; do
  grep -q "$n .*${addr[$n]}" "$dir/plan.txt" || fail "plan does not name $n: $(cat "$dir/plan.txt")"
done
# --spare 1: the last node stands by for a rank of the first two, as serve would keep it.
"$herd" plan --model "$synth" --peers "$peers3" --no-local --parallel pipeline --spare 1 \
  >"$dir/plan.txt" 2>"$dir/coordinator.err" || fail "plan --spare: $(cat "$dir/coordinator.err")"
grep -q "^spare n3 stands by for stage 0 rank 0 (node n[12])" "$dir/plan.txt" ||
  fail "plan --spare 1: $(cat "$dir/plan.txt")"
grep -q "n3 .*${addr[n3]}" "$dir/plan.txt" && fail "plan --spare 1 gave the spare layers"

# --- A hostile peer: garbage on the port, then a normal eval. --------------------------------
python3 - "${addr[n1]#*:}" <<'EOF' || fail "could not send garbage"
import os, socket, sys
port = int(sys.argv[1])
payloads = [
    os.urandom(4096),
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    # A frame header claiming an enormous payload, then nothing.
    b"HERD\x01\x00\x01\x00" + b"\x00" * 8 + b"\xff" * 8 + b"\x00" * 4,
    b"HERD" + os.urandom(60),
]
for p in payloads:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(p)
    except OSError:
        pass
    s.close()
EOF
sleep 0.2
kill -0 "${pid_of[n1]}" 2>/dev/null || fail "n1 died from garbage"
# A connection that says nothing stays open while a coordinator is served.
exec 7<>"/dev/tcp/127.0.0.1/${addr[n1]#*:}"
eval_model "$synth" "$dir/out.f32" --peers "${addr[n1]}" --no-local
exec 7>&-
cmp -s "$dir/ref-synth5.f32" "$dir/out.f32" || fail "after garbage: logits differ"
# A hostile coordinator: bad LOADs and FORWARDs get ERROR replies, the session goes on. It
# takes the model's hash from the memo the coordinators above left in the cache.
read -r _ _ hash_high hash_low _ < <(grep -h " $synth\$" "$XDG_CACHE_HOME"/herd/hashes/*) ||
  fail "no content hash memo for $synth"
n_vocab=$(($(file_bytes "$dir/ref-synth5.f32") / 4 / 16))
python3 "$(dirname "$0")/cluster_e2e_hostile.py" "${addr[n2]#*:}" "$synth" "$hash_low" \
  "$hash_high" 5 "$n_vocab" >"$dir/hostile.out" 2>&1 ||
  fail "hostile coordinator: $(cat "$dir/hostile.out")"
grep -q "valid FORWARD" "$dir/hostile.out" || fail "hostile coordinator: $(cat "$dir/hostile.out")"
kill -0 "${pid_of[n2]}" 2>/dev/null || fail "n2 died from a hostile coordinator"
eval_model "$synth" "$dir/out.f32" --peers "${addr[n2]}" --no-local
cmp -s "$dir/ref-synth5.f32" "$dir/out.f32" || fail "after a hostile coordinator: logits differ"
# Coordinators one right after another (each says BYE and the next connects at once) are
# each served, never told the node is busy with the one that just left.
python3 "$(dirname "$0")/cluster_busy_race.py" "${addr[n3]#*:}" 100 >"$dir/race.out" 2>&1 ||
  fail "back-to-back coordinators: $(tail -3 "$dir/race.out")"
echo "cluster_e2e: f16, plan, garbage, back-to-back coordinators ok ($((SECONDS - start)) s)"

# --- Weight shipping: nodes without model files and with empty caches. ---------------------
# Each model twice over 2 such nodes: first shipped from the coordinator, then from the cache.
XDG_CACHE_HOME=$dir/ship1-cache start_node ship1 --no-model-files
XDG_CACHE_HOME=$dir/ship2-cache start_node ship2 --no-model-files
wait_nodes ship1 ship2
for m in llama-q4_0 llama-q4_k_m qwen3-f16 qwen3moe-f16; do
  for want in "the coordinator" "the cache"; do
    m1=$(mark ship1) m2=$(mark ship2)
    eval_model "$models/$m.gguf" "$dir/out.f32" --peers "${addr[ship1]},${addr[ship2]}" \
      --no-local --parallel pipeline:2
    cmp -s "$dir/ref-$m.f32" "$dir/out.f32" || fail "ship $m (from $want): logits differ"
    loads=$( { since ship1 "$m1"; since ship2 "$m2"; } | grep "loaded layers" || true)
    [ -n "$loads" ] || fail "ship $m: no node loaded"
    grep -v -q "from $want" <<<"$loads" && fail "ship $m: expected 'from $want' in: $loads"
  done
done
# Tensor parallel over the same nodes: each rank is shipped only its cut of every weight
# (the two ranks together receive about one model plus what both hold whole, where whole
# tensors made it two), logits close to one process; then both read their cut from the cache.
for m in llama-q4_0 qwen3moe-f16; do
  for want in "the coordinator" "the cache"; do
    m1=$(mark ship1) m2=$(mark ship2)
    eval_model "$models/$m.gguf" "$dir/tp.f32" --peers "${addr[ship1]},${addr[ship2]}" \
      --no-local --parallel tensor
    close_logits "$dir/ref-$m.f32" "$dir/tp.f32" "tensor parallel, shipped cuts of $m ($want)"
    logs=$( { since ship1 "$m1"; since ship2 "$m2"; } )
    [ "$(grep -c "loaded layers.* from $want" <<<"$logs")" -eq 2 ] ||
      fail "ship tensor $m: expected both ranks to load from $want in: $logs"
    received=$( { grep -o "received [0-9.]* MB" <<<"$logs" || true; } |
      awk '{s += $2} END {print s + 0}')
    if [ "$want" = "the cache" ]; then
      [ "$received" = 0 ] || fail "ship tensor $m: $received MB shipped on a second start"
    else
      model_mb=$(awk -v b="$(file_bytes "$models/$m.gguf")" 'BEGIN {print b / 1e6}')
      awk -v r="$received" -v m="$model_mb" 'BEGIN {exit !(r > 0.5 * m && r < 1.5 * m)}' ||
        fail "ship tensor $m: the ranks received $received MB of a $model_mb MB model"
      echo "cluster_e2e: tensor parallel $m: 2 ranks received $received MB of a $model_mb MB model"
    fi
  done
done
[ -n "$(find "$dir/ship1-cache/herd/models" -name '*.gguf')" ] || fail "ship: nothing cached"
stop_node ship1
stop_node ship2

# --- The frontier architectures: deepseek2 (MLA, sigmoid router, shared experts, a dense
# first layer), gemma3 (sandwich norms, sliding windows), gpt-oss (sinks, biases, MoE). ----
# Pipelines cut only between layers: identical to one process. Tensor and expert parallel
# ranks add partial sums in another order: close (close_logits). --no-local, so that the
# planner cannot leave the nodes out. The MLA ranks keep the whole latent cache each; the
# gpt-oss expert-parallel ranks hold their experts' [ff, n_expert] bias rows.
fstart=$SECONDS
frontier=$models/frontier
fcases=0
# frontier_case <model> <how: pipeline|close> <peers> [options...]
frontier_case() {
  local m=$1 how=$2 peers=$3 what
  shift 3
  what=$(tr -cd , <<<"$peers,")
  what="$m over ${#what} nodes $*"
  eval_model "$frontier/$m.gguf" "$dir/out.f32" --peers "$peers" --no-local "$@"
  if [ "$how" = pipeline ]; then
    cmp -s "$dir/ref-$m.f32" "$dir/out.f32" || fail "$what: logits differ from one process"
  else
    close_logits "$dir/ref-$m.f32" "$dir/out.f32" "$what"
  fi
  fcases=$((fcases + 1))
}
for m in deepseek2-f32 deepseek2-q8_0 gemma3-f32 gpt-oss-f32; do
  eval_model "$frontier/$m.gguf" "$dir/ref-$m.f32"
done
for peers in "$peers2" "$peers3"; do
  count=$(tr -cd , <<<"$peers,")
  count=${#count}
  m1=$(mark n1) m2=$(mark n2) m3=$(mark n3)
  frontier_case deepseek2-f32 pipeline "$peers" --parallel "pipeline:$count"
  # The planner may leave a node out of a 3-layer pipeline under load, never all but one.
  stages=$( { since n1 "$m1"; since n2 "$m2"; since n3 "$m3"; } | grep -c "loaded layers" || true)
  [ "$stages" -ge 2 ] ||
    fail "deepseek2-f32 pipeline:$count: $stages stages loaded: $(cat "$dir/coordinator.err")"
  for moe in expert-parallel split-experts; do
    m1=$(mark n1) m2=$(mark n2) m3=$(mark n3)
    frontier_case deepseek2-f32 close "$peers" --parallel tensor --moe "$moe"
    ranks=$( { since n1 "$m1"; since n2 "$m2"; since n3 "$m3"; } | grep -c "loaded layers \[0, 3)" ||
      true)
    [ "$ranks" -eq "$count" ] ||
      fail "deepseek2-f32 tensor ($moe) over $count nodes: $ranks ranks loaded"
  done
done
frontier_case deepseek2-q8_0 pipeline "$peers2" --parallel pipeline:2
frontier_case deepseek2-q8_0 close "$peers2" --parallel tensor --moe expert-parallel
for m in gemma3-f32 gpt-oss-f32; do
  frontier_case "$m" pipeline "$peers2" --parallel pipeline:2
  frontier_case "$m" close "$peers2" --parallel tensor
done
frontier_case gpt-oss-f32 close "$peers3" --parallel tensor --moe expert-parallel
# Shipped to nodes without the file: pipeline stages, then tensor-parallel ranks their cuts
# of the MLA weights (attn_q_b, attn_kv_b, attn_k_b and attn_v_b by head) and of the
# experts; a second run reads every cut from the cache and receives nothing.
XDG_CACHE_HOME=$dir/fship1-cache start_node fship1 --no-model-files
XDG_CACHE_HOME=$dir/fship2-cache start_node fship2 --no-model-files
wait_nodes fship1 fship2
fpeers=${addr[fship1]},${addr[fship2]}
for parallel in pipeline:2 tensor; do
  for want in "the coordinator" "the cache"; do
    m1=$(mark fship1) m2=$(mark fship2)
    how=close
    [ "$parallel" = tensor ] || how=pipeline
    frontier_case deepseek2-f32 "$how" "$fpeers" --parallel "$parallel" --moe expert-parallel
    logs=$( { since fship1 "$m1"; since fship2 "$m2"; } )
    [ "$(grep -c "loaded layers.* from $want" <<<"$logs")" -eq 2 ] ||
      fail "ship deepseek2-f32 ($parallel): expected both nodes to load from $want in: $logs"
    received=$( { grep -o "received [0-9.]* MB" <<<"$logs" || true; } |
      awk '{s += $2} END {print s + 0}')
    if [ "$want" = "the cache" ]; then
      [ "$received" = 0 ] || fail "ship deepseek2-f32 ($parallel): $received MB on a second run"
    else
      awk -v r="$received" 'BEGIN {exit !(r > 0)}' ||
        fail "ship deepseek2-f32 ($parallel): nothing received in: $logs"
    fi
  done
done
stop_node fship1
stop_node fship2
# GLM-4.5 (frontier2: partial rope, q/k/v biases, a NextN block no stage runs) in pipelines
# over 2 and 3 nodes, identical to one process, and in tensor and expert parallel stages;
# MiniMax-M2's q/k norm over the whole row with its heads cut over 3 ranks.
frontier=$models/frontier2
for m in glm4moe-f32 glm4moe-q8_0 minimax-m2-f32; do
  eval_model "$frontier/$m.gguf" "$dir/ref-$m.f32"
done
for peers in "$peers2" "$peers3"; do
  count=$(tr -cd , <<<"$peers,")
  count=${#count}
  frontier_case glm4moe-f32 pipeline "$peers" --parallel "pipeline:$count"
  frontier_case glm4moe-f32 close "$peers" --parallel tensor --moe expert-parallel
done
frontier_case glm4moe-q8_0 pipeline "$peers2" --parallel pipeline:2
frontier_case glm4moe-f32 close "$peers2" --parallel tensor --moe split-experts
frontier_case minimax-m2-f32 close "$peers3" --parallel tensor
# DeepSeek V4 (frontier2): its hyper-connections carry 4 streams of n_embd per token from
# stage to stage, and each stage keeps its layers' compressed caches.
for m in deepseek4-f32 deepseek4-q8_0; do
  eval_model "$frontier/$m.gguf" "$dir/ref-$m.f32"
  frontier_case "$m" pipeline "$peers2" --parallel pipeline:2
done
frontier_case deepseek4-f32 pipeline "$peers3" --parallel pipeline:3
echo "cluster_e2e: frontier models: $fcases cases across nodes ok ($((SECONDS - fstart)) s)"

# --- The models of 2026: Gated DeltaNet hybrids (qwen35moe, qwen3next), whose linear layers
# keep a recurrent state per sequence on the node that holds them. The pipelines' micro-
# batches cut a prompt into runs, which the recurrence does not see: identical to one
# process. Tensor-parallel ranks (the linear layers cut by V head): close.
frontier=$models/frontier2
for m in qwen35moe-f32 qwen35moe-q8_0 qwen3next-f32; do
  eval_model "$frontier/$m.gguf" "$dir/ref-$m.f32"
  frontier_case "$m" pipeline "$peers2" --parallel pipeline:2
  frontier_case "$m" pipeline "$peers3" --parallel pipeline:3
done
frontier_case qwen35moe-f32 close "$peers2" --parallel tensor --moe expert-parallel
frontier_case qwen35moe-q8_0 close "$peers3" --parallel tensor --moe split-experts
frontier_case qwen3next-f32 close "$peers3" --parallel tensor --moe split-experts
echo "cluster_e2e: Gated DeltaNet hybrids across nodes ok"

# --- Keys. ---------------------------------------------------------------------------------
printf '%s\n' 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef >"$dir/k1"
printf '%s\n' fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210 >"$dir/k2"
start_node keyed --key "$dir/k1"
wait_nodes keyed
grep -q "insecure mode" "$dir/keyed.log" && fail "a keyed node says insecure mode"
llama=$models/llama-q4_0.gguf
ltok=$(tokens "$models/llama-q4_0.0.tokens")
expect_fail "key|auth" eval --model "$llama" --tokens "$ltok" --dump-logits "$dir/x.f32" \
  --peers "${addr[keyed]}" --no-local
expect_fail "key|auth" eval --model "$llama" --tokens "$ltok" --dump-logits "$dir/x.f32" \
  --peers "${addr[keyed]}" --no-local --key "$dir/k2"
expect_fail "key|auth" eval --model "$llama" --tokens "$ltok" --dump-logits "$dir/x.f32" \
  --peers "${addr[n1]}" --no-local --key "$dir/k1"  # a keyed coordinator, a node without
eval_model "$llama" "$dir/out.f32" --peers "${addr[keyed]}" --no-local --key "$dir/k1"
cmp -s "$dir/ref-llama-q4_0.f32" "$dir/out.f32" || fail "keyed (--key): logits differ"
"$herd" plan --model "$llama" --peers "${addr[keyed]}" --no-local --key "$dir/k1" >"$dir/plan.txt" \
  2>"$dir/coordinator.err" || fail "plan with a key: $(cat "$dir/coordinator.err")"
grep -q "keyed .*${addr[keyed]}" "$dir/plan.txt" || fail "plan does not name keyed: $(cat "$dir/plan.txt")"
HERD_KEY=$(cat "$dir/k1") eval_model "$llama" "$dir/out.f32" --peers "${addr[keyed]}" --no-local
cmp -s "$dir/ref-llama-q4_0.f32" "$dir/out.f32" || fail "keyed (HERD_KEY): logits differ"
stop_node keyed
# A node that is gone: the error names its address.
expect_fail "${addr[keyed]}.*(refused|connect)" eval --model "$llama" --tokens "$ltok" \
  --dump-logits "$dir/x.f32" --peers "${addr[keyed]}" --no-local
# With a key a node may listen on every address; without one, not unless --insecure-listen.
"$herd" node --listen 0.0.0.0:0 --threads 1 --name open --key "$dir/k1" 2>"$dir/open.log" &
pid_of[open]=$!
for _ in $(seq 400); do
  grep -q "listening on 0\.0\.0\.0:" "$dir/open.log" && break
  kill -0 "${pid_of[open]}" 2>/dev/null || fail "keyed node on 0.0.0.0: $(cat "$dir/open.log")"
  sleep 0.05
done
grep -q "listening on 0\.0\.0\.0:" "$dir/open.log" || fail "keyed node on 0.0.0.0 did not start"
stop_node open
code=0
timeout 20 "$herd" node --listen 0.0.0.0:0 --threads 1 >/dev/null 2>"$dir/open.err" || code=$?
[ "$code" -ne 0 ] && [ "$code" -ne 124 ] || fail "node on 0.0.0.0 without a key: exit $code"
grep -q "herd: error:" "$dir/open.err" && grep -q -- "--insecure-listen" "$dir/open.err" &&
  grep -qi "key" "$dir/open.err" || fail "node on 0.0.0.0 without a key: $(cat "$dir/open.err")"
echo "cluster_e2e: shipping, keys ok ($((SECONDS - start)) s)"

# --- Identities, allow-lists and --insecure (docs/cluster.md "Security"). ----------------
ev=(eval --model "$llama" --tokens "$ltok" --dump-logits "$dir/x.f32" --no-local --threads 1)
id_coord=$("$herd" node --show-id --identity "$dir/coord.identity") || fail "--show-id failed"
[ ${#id_coord} -eq 43 ] || fail "--show-id printed '$id_coord'"
[ "$("$herd" node --show-id --identity "$dir/coord.identity")" = "$id_coord" ] ||
  fail "the identity changed on its second use"
[ "$(stat -c %a "$dir/coord.identity")" = 600 ] || fail "identity file mode $(stat -c %a "$dir/coord.identity")"
printf 'garbage\n' >"$dir/bad.identity"
expect_fail "bad.identity.*not a herd identity file" node --show-id --identity "$dir/bad.identity"
[ "$(cat "$dir/bad.identity")" = garbage ] || fail "a corrupt identity file was replaced"
printf '# the coordinator\n%s  # ours\n' "$id_coord" >"$dir/allowed.ids"
start_node picky --key "$dir/k1" --allow-ids "$dir/allowed.ids"
wait_nodes picky
picky_id=$(grep -o "node id [A-Za-z0-9_-]*" "$dir/picky.log" | head -1 | cut -d' ' -f3)
[ ${#picky_id} -eq 43 ] || fail "node did not log its id: $(cat "$dir/picky.log")"
# A coordinator with another identity (the default one, under $XDG_CONFIG_HOME) is refused
# and named by its id on both ends; the listed one is served.
other_id=$("$herd" node --show-id)
expect_fail "$other_id.*allow-list" "${ev[@]}" --peers "${addr[picky]}" --key "$dir/k1"
grep -q "node id $other_id is not on this node's allow-list" "$dir/picky.log" ||
  fail "picky did not log the refused id: $(tail -3 "$dir/picky.log")"
eval_model "$llama" "$dir/out.f32" --peers "${addr[picky]}" --no-local --key "$dir/k1" \
  --identity "$dir/coord.identity"
cmp -s "$dir/ref-llama-q4_0.f32" "$dir/out.f32" || fail "allowed identity: logits differ"
grep -q "accepted 'coordinator (127.0.0.1:[0-9]*)': node id $id_coord" "$dir/picky.log" ||
  fail "picky did not log the coordinator's id: $(tail -3 "$dir/picky.log")"
# The coordinator's own list lacks the node.
expect_fail "$picky_id.*allow-list" "${ev[@]}" --peers "${addr[picky]}" --key "$dir/k1" \
  --identity "$dir/coord.identity" --allow-ids "$dir/allowed.ids"
# --insecure (plaintext frames) on one end only is refused naming the flag; on both, served.
expect_fail "--insecure" "${ev[@]}" --peers "${addr[picky]}" --key "$dir/k1" \
  --identity "$dir/coord.identity" --insecure
stop_node picky
start_node plain --insecure
wait_nodes plain
expect_fail "--insecure" "${ev[@]}" --peers "${addr[plain]}"
eval_model "$llama" "$dir/out.f32" --peers "${addr[plain]}" --no-local --insecure
cmp -s "$dir/ref-llama-q4_0.f32" "$dir/out.f32" || fail "--insecure: logits differ"
stop_node plain
echo "cluster_e2e: identities, allow-lists, --insecure ok ($((SECONDS - start)) s)"

# --- Failures: a node that stops answering, a node that dies. -------------------------------
# lose_node <signal> <name> <max seconds> [parallel]: a long decode (bench: tens of seconds)
# across n1 and <name> (a pipeline, or the two ranks of a tensor-parallel stage); once <name>
# has loaded and decoding is under way, send it <signal>; within <max seconds> the
# coordinator must name the lost node and go on with a pod formed again on n1 alone
# (tests/cluster_recovery_test.py checks that the answer is unchanged). Then the bench is
# stopped.
lose_node() {
  local sig=$1 name=$2 max=$3 parallel=${4:-pipeline} m run_pid t0 elapsed=""
  m=$(mark "$name")
  "$herd" bench --model "$synth" -p 16 -n 4000 -r 100 -c 8192 --threads 1 \
    --peers "${addr[n1]},${addr[$name]}" --no-local --parallel "$parallel" \
    >/dev/null 2>"$dir/coordinator.err" &
  run_pid=$!
  for _ in $(seq 200); do
    since "$name" "$m" | grep -q "loaded layers" && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.05
  done
  since "$name" "$m" | grep -q "loaded layers" || fail "$sig $name: it never loaded"
  sleep 0.5
  kill -0 "$run_pid" 2>/dev/null || fail "$sig $name: the run ended before the signal"
  kill "-$sig" "${pid_of[$name]}"
  t0=$EPOCHREALTIME
  for _ in $(seq 400); do
    if grep -q "pod formed again" "$dir/coordinator.err"; then
      elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}')
      break
    fi
    kill -0 "$run_pid" 2>/dev/null || fail "$sig $name: the coordinator exited: $(cat "$dir/coordinator.err")"
    sleep 0.05
  done
  kill -KILL "$run_pid"
  wait "$run_pid" 2>/dev/null || true
  [ -n "$elapsed" ] || fail "$sig $name: no new pod within 20 s: $(cat "$dir/coordinator.err")"
  echo "cluster_e2e: SIG$sig $name ($parallel): the coordinator went on after ${elapsed} s:" \
    "$(grep -o "lost node '$name'.*" "$dir/coordinator.err" | head -1)"
  awk -v e="$elapsed" -v m="$max" 'BEGIN {exit !(e < m)}' || fail "$sig $name: the coordinator took ${elapsed} s"
  grep -q "lost node '$name'" "$dir/coordinator.err" ||
    fail "$sig $name: the coordinator does not name the node: $(cat "$dir/coordinator.err")"
  true
}
start_node victim
start_node victim2
wait_nodes victim victim2
lose_node STOP victim 6.5
# Resumed, it drops the dead session and serves the next coordinator.
kill -CONT "${pid_of[victim]}"
eval_model "$synth" "$dir/out.f32" --peers "${addr[n1]},${addr[victim]}" --no-local \
  --parallel pipeline:2
cmp -s "$dir/ref-synth5.f32" "$dir/out.f32" || fail "victim after SIGCONT: logits differ"
# A stopped rank of a tensor-parallel stage: the coordinator goes on with n1 alone, and
# both serve again once it resumes.
lose_node STOP victim 6.5 tensor
kill -CONT "${pid_of[victim]}"
eval_model "$synth" "$dir/out.f32" --peers "${addr[n1]},${addr[victim]}" --no-local \
  --parallel tensor
close_logits "$dir/ref-synth5.f32" "$dir/out.f32" "tensor parallel after SIGCONT"
lose_node KILL victim2 3
wait "${pid_of[victim2]}" 2>/dev/null || true
# A coordinator killed mid-run: its nodes serve the next one.
"$herd" bench --model "$synth" -p 16 -n 4000 -r 100 -c 8192 --threads 1 \
  --peers "${addr[n1]},${addr[n2]}" --no-local --parallel pipeline:2 >/dev/null 2>&1 &
run_pid=$!
sleep 1.5
kill -0 "$run_pid" 2>/dev/null || fail "the bench to kill ended early"
kill -KILL "$run_pid"
wait "$run_pid" 2>/dev/null || true
eval_model "$synth" "$dir/out.f32" --peers "${addr[n1]},${addr[n2]}" --no-local \
  --parallel pipeline:2
cmp -s "$dir/ref-synth5.f32" "$dir/out.f32" || fail "after a killed coordinator: logits differ"
# A node that accepts the connection but never answers (stopped before the coordinator came).
kill -STOP "${pid_of[victim]}"
t0=$EPOCHREALTIME
expect_fail "${addr[victim]}" eval --model "$synth" --tokens 1,2,3 --dump-logits "$dir/x.f32" \
  --peers "${addr[victim]}" --no-local
elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}')
awk -v e="$elapsed" 'BEGIN {exit !(e < 8)}' || fail "a stopped node: the coordinator took ${elapsed} s"
kill -CONT "${pid_of[victim]}"
echo "cluster_e2e: ok ($((SECONDS - start)) s)"
