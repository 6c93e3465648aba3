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
source "$here/hub_lib.sh"
hub_lib_init

# The honest model is several times the cheater's work per token, so the cheater measures
# fastest and the router sends it requests (speeds of such small models are noisy).
synth_model "$dir/honest.gguf" --embd 256 --layers 4 --heads 8 --kv-heads 2
synth_model "$dir/small.gguf" --embd 64 --layers 1 --heads 4 --kv-heads 2
echo proof-operator >"$dir/operators"
chmod 600 "$dir/operators"
hub_start hub --db "$dir/hub.db" --api-key proof-key --operator-key-file "$dir/operators" \
  --credits 1000000 --heartbeat 1 --pod-timeout 10
url=$hub_url

# One slot each: three clients at once keep them busy, so the router sends the cheater
# requests too, whichever pod measured fastest on this (busy) machine.
pod_start honest-avx2 "$dir/honest.gguf" --alias herd-proof --hub "$url" --hub-name honest-avx2 \
  --isa avx2 --threads 1 --slots 1
pod_start honest-best "$dir/honest.gguf" --alias herd-proof --hub "$url" --hub-name honest-best \
  --threads 2 --slots 1
pod_start cheater "$dir/small.gguf" --alias herd-proof --hub "$url" --hub-name cheater --threads 1
for name in honest-avx2 honest-best cheater; do wait_registered "$name" "$url"; done

HERD_HUB_URL=$url HERD_API_KEY=proof-key HERD_OPERATOR_KEY=proof-operator node "$here/node/hub_proof_test.mjs" ||
  fail "the proof (tests/node/hub_proof_test.mjs)"
echo PASS
