#!/usr/bin/env bash
# End to end under mpirun (--transport mpi): rank 0 coordinates, ranks 1..n-1 serve as nodes.
#   - pipelines (with and without --no-local, stage links between ranks) give logits
#     byte-identical to one process, on the shared models and an uneven 5-layer model;
#   - tensor-parallel stages of 2 and 3 ranks, and pipeline:2,tensor:2, give logits
#     byte-identical to the same plan over TCP nodes (herd node): the same all-reduce (herd's
#     ring) adds the same partial sums in the same order, whatever carries them;
#   - herd run prints its text once (rank 0), the same greedy text as one process;
#   - herd serve listens on rank 0 only, answers through the ranks, ends on SIGTERM;
#   - one rank alone, and --peers beside it, are clear errors.
# Ranks and TCP nodes report a fixed bandwidth and matmul speed so that both transports get
# the same plan (shares follow measured speeds, which vary on a loaded machine).
# usage: mpi_e2e_test.sh path/to/herd mpiexec [mpiexec flags...]   (CMake passes Open MPI's
# --oversubscribe --allow-run-as-root --mca btl self,vader ...: loopback and shared memory).
set -euo pipefail
herd=${1:?usage: mpi_e2e_test.sh path/to/herd mpiexec [flags...]}
shift
mpi=("$@")
[ ${#mpi[@]} -gt 0 ] || { echo "usage: mpi_e2e_test.sh path/to/herd mpiexec [flags...]"; exit 2; }
command -v timeout >/dev/null || timeout() { gtimeout "$@"; }
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")
models=$(cd "$(dirname "$0")/../../shared/models" && pwd)
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache
unset HERD_KEY

source "$(dirname "$0")/node_lib.sh"
start=$SECONDS
speed=(--bandwidth 10 --matmul 40)             # herd node
rank_speed=(--rank-bandwidth 10 --rank-matmul 40)  # MPI ranks 1..n-1

tokens() { tr -s ' \n' ',' <"$1" | sed 's/^,//; s/,$//'; }
# eval_one <model> <out> [options...]: herd eval in this process (or over --peers).
eval_one() {
  local model=$1 out=$2
  shift 2
  "$herd" eval --model "$model" --tokens "$(tokens "${model%.gguf}.0.tokens")" \
    --dump-logits "$out" --threads 1 "$@" 2>"$dir/eval.log" >/dev/null ||
    fail "eval $(basename "$model") $*: $(cat "$dir/eval.log")"
}
# eval_mpi <n> <model> <out> [options...]: the same under mpirun -n <n> --transport mpi.
eval_mpi() {
  local n=$1 model=$2 out=$3
  shift 3
  timeout 120 "${mpi[@]}" -n "$n" "$herd" eval --transport mpi "${rank_speed[@]}" \
    --model "$model" --tokens "$(tokens "${model%.gguf}.0.tokens")" --dump-logits "$out" \
    --threads 1 "$@" >"$dir/mpi.log" 2>&1 ||
    fail "mpirun -n $n eval $(basename "$model") $*: $(tail -30 "$dir/mpi.log")"
}
# loaded_ranks: the ranks that loaded layers in the last eval_mpi, e.g. "1 2".
loaded_ranks() {
  grep -o "herd rank:[0-9]*: loaded layers" "$dir/mpi.log" | grep -o "rank:[0-9]*" |
    cut -d: -f2 | sort -n | tr '\n' ' ' | sed 's/ $//'
}

# A 5-layer model, so that 3 stages split it unevenly, and an f16 one for tensor parallelism.
synth=$dir/synth5.gguf
"$herd" synth --arch llama --layers 5 --embd 64 --ff 512 --heads 4 --kv-heads 2 --ctx 8192 \
  --type q4_0 --out "$synth" >/dev/null 2>&1 || fail "synth"
printf '1 17 42 99 3 250 7 8 9 10 11 12 13 14 15 16\n' >"${synth%.gguf}.0.tokens"
f16model=$dir/synth5-f16.gguf
"$herd" synth --arch qwen3 --layers 5 --embd 64 --ff 512 --heads 4 --kv-heads 2 --type f16 \
  --out "$f16model" >/dev/null 2>&1 || fail "synth f16"
cp "${synth%.gguf}.0.tokens" "${f16model%.gguf}.0.tokens"

# --- Pipelines: byte-identical logits to one process. -------------------------------------
cases=0
for m in llama-q4_0 qwen3-f16 qwen3moe-f16 synth5; do
  model=$models/$m.gguf
  [ "$m" = synth5 ] && model=$synth
  eval_one "$model" "$dir/ref-$m.f32"
  for case in "3 --no-local 2" "3 local 3"; do
    read -r n nl p <<<"$case"
    [ "$nl" = local ] && nl=""
    eval_mpi "$n" "$model" "$dir/mpi.f32" --parallel "pipeline:$p" $nl
    cmp -s "$dir/ref-$m.f32" "$dir/mpi.f32" || fail "$m mpirun -n $n $nl pipeline:$p: logits differ"
    cases=$((cases + 1))
    # The 5-layer model's layers outweigh its head: without this process, every rank gets a
    # stage (with it, the planner may leave one out, as over TCP).
    if [ "$m" = synth5 ] && [ -n "$nl" ]; then
      [ "$(loaded_ranks)" = "1 2" ] || fail "synth5 pipeline:$p $nl: ranks loaded: '$(loaded_ranks)'"
    fi
  done
done
eval_mpi 3 "$synth" "$dir/mpi.f32" --parallel pipeline:2 --no-local
grep -q "rank:2: .*input from the previous stage" "$dir/mpi.log" ||
  fail "pipeline:2 --no-local: rank 2 did not take its input from rank 1 (stage link)"
echo "mpi_e2e: $cases pipelines identical to one process ($((SECONDS - start)) s)"

# --- Tensor parallel: identical to the same plan over TCP nodes. ------------------------------
start_node n1 "${speed[@]}"
start_node n2 "${speed[@]}"
start_node n3 "${speed[@]}"
start_node n4 "${speed[@]}"
wait_nodes n1 n2 n3 n4
peers2=${addr[n1]},${addr[n2]}
peers3=${addr[n1]},${addr[n2]},${addr[n3]}
peers4=$peers3,${addr[n4]}
tp_case() {  # tp_case <model> <ranks> <tcp peers> <parallel>
  local model=$1 n=$2 peers=$3 parallel=$4 name
  name="$(basename "$model" .gguf) --parallel $parallel over $((n - 1)) ranks"
  eval_one "$model" "$dir/tcp.f32" --peers "$peers" --no-local --parallel "$parallel"
  eval_mpi "$n" "$model" "$dir/mpi.f32" --no-local --parallel "$parallel"
  local want
  want=$(seq -s ' ' 1 $((n - 1)))
  [ "$(loaded_ranks)" = "$want" ] || fail "$name: ranks loaded: '$(loaded_ranks)', want '$want'"
  cmp -s "$dir/tcp.f32" "$dir/mpi.f32" || fail "$name: logits differ from TCP"
  echo "mpi_e2e: $name: identical to TCP"
}
tp_case "$f16model" 3 "$peers2" tensor
tp_case "$models/qwen3-f16.gguf" 3 "$peers2" tensor
tp_case "$f16model" 4 "$peers3" tensor
tp_case "$f16model" 5 "$peers4" pipeline:2,tensor:2
echo "mpi_e2e: tensor parallel ok ($((SECONDS - start)) s)"

# --- herd run: the text once, the same as one process. --------------------------------------
"$herd" run --model "$f16model" --prompt "hello world" -n 24 --temp 0 --threads 1 \
  >"$dir/run_ref.txt" 2>"$dir/eval.log" || fail "run: $(cat "$dir/eval.log")"
timeout 120 "${mpi[@]}" -n 3 "$herd" run --transport mpi "${rank_speed[@]}" --model "$f16model" \
  --prompt "hello world" -n 24 --temp 0 --threads 1 --parallel tensor \
  >"$dir/run_mpi.txt" 2>"$dir/mpi.log" || fail "mpirun run: $(tail -30 "$dir/mpi.log")"
[ -s "$dir/run_ref.txt" ] || fail "run printed nothing"
cmp -s "$dir/run_ref.txt" "$dir/run_mpi.txt" ||
  fail "mpirun run: text differs: '$(cat "$dir/run_ref.txt")' vs '$(cat "$dir/run_mpi.txt")'"
echo "mpi_e2e: herd run under mpirun printed the same text, once"

# --- herd serve: rank 0 alone listens (the others serve as nodes), answers, ends on SIGTERM. --
"${mpi[@]}" -n 3 "$herd" serve --transport mpi "${rank_speed[@]}" --model "$f16model" \
  --port 0 --threads 1 --parallel tensor >"$dir/serve.log" 2>&1 &
serve_pid=$!
port=""
for _ in $(seq 600); do
  port=$(grep -o "serve: listening on http://127.0.0.1:[0-9]*" "$dir/serve.log" | grep -o "[0-9]*$" || true)
  [ -n "$port" ] && curl -s "localhost:$port/health" | grep -q ready && break
  kill -0 "$serve_pid" 2>/dev/null || fail "mpirun serve exited: $(tail -20 "$dir/serve.log")"
  sleep 0.1
done
[ -n "$port" ] || fail "mpirun serve did not listen: $(tail -20 "$dir/serve.log")"
listening=$(grep -c "serve: listening" "$dir/serve.log" || true)
[ "$listening" = 1 ] || fail "mpirun serve: $listening ranks listen, want 1"
curl -s "localhost:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "hello", "max_tokens": 8, "temperature": 0}' >"$dir/completion.json"
grep -q '"completion_tokens":8' "$dir/completion.json" ||
  fail "mpirun serve: no completion: $(cat "$dir/completion.json")"
curl -s "localhost:$port/api/cluster" | grep -q '"rank:2"' || fail "mpirun serve: rank 2 not in the pod"
kill -TERM "$serve_pid"
for _ in $(seq 300); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$serve_pid" 2>/dev/null && fail "mpirun serve did not end on SIGTERM"
wait "$serve_pid" 2>/dev/null || true
grep -q "serve: stopped" "$dir/serve.log" || fail "mpirun serve: rank 0 did not stop cleanly"
echo "mpi_e2e: herd serve under mpirun: one listener, a completion, ended on SIGTERM"

# --- Errors. ----------------------------------------------------------------------------------
expect_fail() {  # expect_fail <needle> <command...>
  local needle=$1 code=0
  shift
  timeout 60 "$@" >"$dir/err.log" 2>&1 || code=$?
  [ "$code" -ne 0 ] || fail "$* succeeded, expected '$needle'"
  [ "$code" -ne 124 ] || fail "$* hung"
  grep -q -- "$needle" "$dir/err.log" || fail "$*: expected '$needle' in: $(cat "$dir/err.log")"
  echo "mpi_e2e: expected: $(grep -m1 -- "$needle" "$dir/err.log")"
}
expect_fail "the job has one rank" "${mpi[@]}" -n 1 "$herd" run --transport mpi -m "$synth" -p hi
expect_fail "not --peers" "${mpi[@]}" -n 2 "$herd" run --transport mpi -m "$synth" -p hi \
  --peers "${addr[n1]}"
expect_fail "no such file\|cannot open\|not found" "${mpi[@]}" -n 3 "$herd" run --transport mpi \
  "${rank_speed[@]}" -m "$dir/missing.gguf" -p hi
echo "mpi_e2e: ok ($((SECONDS - start)) s)"
