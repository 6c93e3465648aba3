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
# Then the smarter cheaters (issue 28), node.js pods of their own identities relaying to a
# real pod (tests/node/cheat_pod.mjs): one inflating its token counts and one leaving out
# the ids (both relaying an honest pod's answers), a sybil pair vouching for each other and
# one claiming 1e6 tok/s (relaying the cheater's). None is paid or trusted, none of their
# answers reaches the client, the sybils are never asked to check, the honest pods lose
# nothing. The hub's root of trust is one honest pod named with --trust-pod (the seed): the
# other honest pod becomes a checker by passing the seed's checks.
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
seed=$(XDG_CONFIG_HOME=$dir/config-honest-avx2 "$herd" node --show-id) || fail "the seed's id"
hub_start hub --db "$dir/hub.db" --api-key proof-key --operator-key-file "$dir/operators" \
  --credits 1000000 --heartbeat 1 --pod-timeout 10 --trust-pod "$seed"
url=$hub_url

# One slot each: three clients at once keep them busy, so the router sends the cheater
# requests too, whichever pod measured fastest on this (busy) machine.
pod_start honest-avx2 "$dir/honest.gguf" --alias herd-proof --hub "$url" --hub-name honest-avx2 \
  --isa avx2 --threads 1 --slots 1
pod_start honest-best "$dir/honest.gguf" --alias herd-proof --hub "$url" --hub-name honest-best \
  --threads 2 --slots 1
pod_start cheater "$dir/small.gguf" --alias herd-proof --hub "$url" --hub-name cheater --threads 1
for name in honest-avx2 honest-best cheater; do wait_registered "$name" "$url"; done

# pod_url NAME: where a registered pod answers, from the hub's view.
pod_url() {
  curl -sf "$url/api/network" |
    node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{
      const p=JSON.parse(s).pods.find(p=>p.name===process.argv[1]);console.log(p?p.url:'')})" "$1"
}
honest=$(pod_url honest-best)
small=$(pod_url cheater)
[ -n "$honest" ] && [ -n "$small" ] || fail "the pods' URLs are not in /api/network"
# cheat MODE NAME BACKEND: a dishonest pod, registered once it says where it listens.
cheat() {
  node "$here/node/cheat_pod.mjs" "$1" "$2" "$url" "$3" herd-proof 4096 >"$dir/$2.log" 2>&1 &
  pids+=($!)
}
cheat inflate inflater "$honest"
cheat drop-ids dropper "$honest"
cheat sybil sybil-a "$small"
cheat sybil sybil-b "$small"
cheat fast fast "$small"
for name in inflater dropper sybil-a sybil-b fast; do
  for _ in $(seq 200); do grep -q "listening on" "$dir/$name.log" && break; sleep 0.05; done
  grep -q "listening on" "$dir/$name.log" || fail "the cheating pod $name did not register"
done

HERD_HUB_URL=$url HERD_API_KEY=proof-key HERD_OPERATOR_KEY=proof-operator \
  node "$here/node/hub_proof_test.mjs" ||
  fail "the proof (tests/node/hub_proof_test.mjs)"
echo PASS
