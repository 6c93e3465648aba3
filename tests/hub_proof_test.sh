#!/usr/bin/env bash
# The network's proof (issue 19): a hub, three `herd serve --hub` pods advertising one model,
# herd-proof: two honest ones on the same synthetic model but other kernels and thread
# counts (AVX2 with 1 thread, the best ISA with 2), and a cheater serving a smaller synthetic
# model under the same name. The official
# openai client (tests/node/hub_proof_test.mjs) sends 50 requests through the hub, greedy
# and sampled, chat and plain, streamed and not. Every request must be answered; the
# cheater must be caught (flagged, its credits withheld) within its first requests at the
# default check rate, the honest pods never; the ledger must sum to zero and the client's
# account must have paid exactly the tokens it was told it used.
set -euo pipefail
herd=$(realpath "${1:?usage: hub_proof_test.sh path/to/herd}")
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node/node_modules/openai" ] ||
  { echo "FAIL: tests/node has no node_modules: run scripts/install-deps"; exit 1; }
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for log in "$dir"/*.log; do echo "--- $log" >&2; tail -20 "$log" >&2; done
  exit 1
}

# The honest model is several times the cheater's work per token, so the cheater measures
# fastest and the router sends it requests (speeds of such small models are noisy).
"$herd" synth --arch qwen3 --embd 256 --layers 4 --heads 8 --kv-heads 2 --type q4_0 \
  --out "$dir/honest.gguf" >/dev/null 2>&1 || fail "synth honest"
"$herd" synth --arch qwen3 --embd 64 --layers 1 --heads 4 --kv-heads 2 --type q4_0 \
  --out "$dir/small.gguf" >/dev/null 2>&1 || fail "synth small"

"$herd" hub --port 0 --db "$dir/hub.db" --api-key proof-key --credits 1000000 \
  --heartbeat 1 --pod-timeout 10 2>"$dir/hub.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$dir/hub.log" && break; sleep 0.05; done
url=$(grep -o "http://[0-9.]*:[0-9]*" "$dir/hub.log" | head -1)
[ -n "$url" ] || fail "hub did not say where it listens"

# pod NAME MODEL FLAGS...: each pod its own identity (its own XDG_CONFIG_HOME).
pod() {
  local name=$1 model=$2
  shift 2
  XDG_CONFIG_HOME=$dir/config-$name "$herd" serve --model "$dir/$model.gguf" --alias herd-proof \
    --host 127.0.0.1 --port 0 --hub "$url" --hub-name "$name" "$@" 2>"$dir/$name.log" &
  pids+=($!)
}
# One slot each: three clients at once keep them busy, so the router sends the cheater
# requests too, whichever pod measured fastest on this (busy) machine.
pod honest-avx2 honest --isa avx2 --threads 1 --slots 1
pod honest-best honest --threads 2 --slots 1
pod cheater small --threads 1
for name in honest-avx2 honest-best cheater; do
  for _ in $(seq 600); do grep -q "registered with the hub" "$dir/$name.log" && break; sleep 0.05; done
  grep -q "registered with the hub at $url" "$dir/$name.log" || fail "pod $name did not register"
done

HERD_HUB_URL=$url HERD_API_KEY=proof-key node "$here/node/hub_proof_test.mjs" ||
  fail "the proof (tests/node/hub_proof_test.mjs)"
echo PASS
