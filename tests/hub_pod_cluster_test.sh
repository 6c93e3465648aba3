#!/usr/bin/env bash
# A pod of several machines joins the network through its coordinator: two `herd node`s on
# 127.0.0.1 and `herd serve --peers ... --no-local --parallel pipeline:2 --hub URL` over
# them. The coordinator times the whole pod (its speeds are the pipeline's), registers it
# with the hub, and answers a client's request routed through the hub with the pod's
# greedy text (the same as the coordinator answers directly).
set -euo pipefail
herd=$(realpath "${1:?usage: hub_pod_cluster_test.sh path/to/herd}")
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache XDG_CONFIG_HOME=$dir/config XDG_DATA_HOME=$dir/data
unset HERD_KEY
source "$here/node_lib.sh"

for name in n1 n2; do start_node "$name" --bandwidth 10; done
wait_nodes n1 n2
"$herd" synth --arch qwen3 --embd 128 --layers 4 --heads 4 --kv-heads 2 --type q4_0 \
  --out "$dir/m.gguf" >/dev/null 2>&1 || fail "synth"

"$herd" hub --port 0 --allow-private-pods --api-key k --heartbeat 1 --pod-timeout 5 2>"$dir/hub.log" &
for _ in $(seq 100); do grep -q "listening on" "$dir/hub.log" && break; sleep 0.05; done
url=$(grep -o "http://[0-9.]*:[0-9]*" "$dir/hub.log" | head -1)
[ -n "$url" ] || fail "the hub did not say where it listens"

"$herd" serve --model "$dir/m.gguf" --alias pod-model --host 127.0.0.1 --port 0 \
  --peers "${addr[n1]},${addr[n2]}" --no-local --parallel pipeline:2 --hub "$url" \
  --hub-name cluster-pod 2>"$dir/serve.log" &
for _ in $(seq 600); do grep -q "registered with the hub" "$dir/serve.log" && break; sleep 0.05; done
grep -q "registered with the hub at $url " "$dir/serve.log" || fail "the pod did not register"
pod_url=$(sed -n 's|^serve: listening on \(http://127.0.0.1:[0-9]*\).*|\1|p' "$dir/serve.log")

curl -s "$url/api/network" >"$dir/network.json"
python3 - "$dir/network.json" "$pod_url" <<'PY' || fail "/api/network: $(cat "$dir/network.json")"
import json, sys
pods = json.load(open(sys.argv[1]))["pods"]
assert len(pods) == 1, pods
p = pods[0]
assert p["name"] == "cluster-pod" and p["url"] == sys.argv[2], p
assert p["decode_tokens_per_s"] > 0 and p["prefill_tokens_per_s"] > 0, p
assert [m["name"] for m in p["models"]] == ["pod-model"], p
PY

request='{"model": "pod-model", "prompt": "The herd runs", "max_tokens": 10, "temperature": 0}'
curl -s -H 'Content-Type: application/json' -d "$request" "$pod_url/v1/completions" \
  >"$dir/direct.json"
curl -s -H 'Content-Type: application/json' -H 'Authorization: Bearer k' -d "$request" \
  "$url/v1/completions" >"$dir/via-hub.json"
python3 - "$dir/direct.json" "$dir/via-hub.json" <<'PY' || fail "answers: $(cat "$dir/via-hub.json")"
import json, sys
direct, via = (json.load(open(f)) for f in sys.argv[1:])
assert via["choices"][0]["text"] == direct["choices"][0]["text"], (direct, via)
assert via["usage"]["completion_tokens"] == 10, via
assert "herd" not in via, via
PY
echo "hub_pod_cluster: a pod of two nodes registered through its coordinator and answered through the hub"
echo PASS
