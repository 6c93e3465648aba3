#!/usr/bin/env bash
# A pod asked to load a model that clients want: a hub (--load-after 3) and one real
# `herd serve --models-dir` pod serving model A, whose dir also holds model B (another small
# synthetic model). Requests for B get 503 with Retry-After (not 404), the third makes the hub
# ask the pod (POST /api/load with its control token), the pod swaps A for B and registers
# at once, and then B's answers through the hub equal `herd run`'s greedy text on B.
# /api/load without the token, or with another, is refused; a model not in the dir is 404.
set -euo pipefail
herd=$(realpath "${1:?usage: hub_load_test.sh path/to/herd}")
source "$(dirname "$0")/hub_lib.sh"
hub_lib_init
status() { curl -s -o "$dir/body" -D "$dir/headers" -w '%{http_code}' "$@"; }
ask() {  # ask MODEL: a greedy completion through the hub
  status -H 'Content-Type: application/json' -H "Authorization: Bearer k1" \
    -d "{\"model\": \"$1\", \"prompt\": \"The herd runs\", \"max_tokens\": 12, \"temperature\": 0}" \
    "$url/v1/completions"
}

mkdir -p "$dir/models"
"$herd" synth --arch qwen3 --embd 128 --layers 2 --heads 4 --kv-heads 2 --type q4_0 \
  --out "$dir/models/model-a.gguf" >/dev/null 2>&1 || fail "synth A"
"$herd" synth --arch llama --embd 96 --layers 3 --heads 4 --kv-heads 4 --type q8_0 --seed 7 \
  --out "$dir/models/model-b.gguf" >/dev/null 2>&1 || fail "synth B"
cmp -s "$dir/models/model-a.gguf" "$dir/models/model-b.gguf" && fail "A and B are the same file"

hub_start hub --api-key k1 --heartbeat 30 --pod-timeout 60 --load-after 3
url=$hub_url
pod_start serve "$dir/models/model-a.gguf" --models-dir "$dir/models" --threads 1 --hub "$url" \
  --hub-name pod-1
serve_pid=${pids[-1]}
wait_registered serve "$url"
pod_url=$(sed -n 's|^serve: listening on \(http://127.0.0.1:[0-9]*\).*|\1|p' "$dir/serve.log")

# The network shows what the pod could load; /v1/models marks B as loadable.
status "$url/api/network" >/dev/null
python3 - "$dir/body" <<'PY' || fail "/api/network: $(cat "$dir/body")"
import json, sys
n = json.load(open(sys.argv[1]))
p, = n["pods"]
assert [m["name"] for m in p["models"]] == ["model-a"], p
assert p["loadable"] == ["model-a", "model-b"] and p["loading"] is None, p
assert n["loads"]["loads"] == [] and n["loads"]["load_after"] == 3, n["loads"]
PY
status -H "Authorization: Bearer k1" "$url/v1/models" >/dev/null
python3 - "$dir/body" <<'PY' || fail "/v1/models: $(cat "$dir/body")"
import json, sys
data = {m["id"]: m for m in json.load(open(sys.argv[1]))["data"]}
assert data["model-a"]["pods"] == 1 and "state" not in data["model-a"], data
assert data["model-b"]["pods"] == 0 and data["model-b"]["state"] == "loadable", data
assert data["model-b"]["loadable_pods"] == 1, data
PY

# Only the hub may make the pod load: no token, another token, no such model.
[ "$(status -d '{"model": "model-b"}' "$pod_url/api/load")" = 401 ] ||
  fail "/api/load without a token: $(cat "$dir/body")"
[ "$(status -H 'Authorization: Bearer forged' -d '{"model": "model-b"}' "$pod_url/api/load")" = 403 ] ||
  fail "/api/load with another token: $(cat "$dir/body")"
[ "$(status "$url/v1/completions" -H "Authorization: Bearer k1" \
  -d '{"model": "nobody-has-it", "prompt": "x"}')" = 404 ] || fail "an unknown model: $(cat "$dir/body")"

# Requests for B: 503 and Retry-After; the third starts the load.
for i in 1 2 3; do
  [ "$(ask model-b)" = 503 ] || fail "request $i for B: $(cat "$dir/body")"
  grep -qi '^Retry-After: [0-9]' "$dir/headers" || fail "request $i: no Retry-After: $(cat "$dir/headers")"
done
grep -q "is being loaded on a pod" "$dir/body" || fail "the third request's answer: $(cat "$dir/body")"
grep -q "the hub asked for model 'model-b'" "$dir/serve.log" || fail "the pod was not asked"
# Meanwhile: the network shows the load, and B is refused with 503 + Retry-After or answered.
status "$url/api/network" >/dev/null
grep -q '"model-b"' "$dir/body" || fail "/api/network during the load: $(cat "$dir/body")"
code=
for _ in $(seq 300); do
  code=$(ask model-b)
  [ "$code" = 200 ] && break
  [ "$code" = 503 ] || fail "during the load, B got $code: $(cat "$dir/body")"
  grep -qi '^Retry-After: [0-9]' "$dir/headers" || fail "503 without Retry-After during the load"
  sleep 0.1
done
[ "$code" = 200 ] || fail "B was never answered: $(cat "$dir/body")"
grep -q "ready: model 'model-b'" "$dir/serve.log" || fail "the pod did not say it serves B"
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' \
  "$dir/body" >"$dir/via-hub.txt" || fail "B's answer: $(cat "$dir/body")"
"$herd" run --model "$dir/models/model-b.gguf" --prompt "The herd runs" -n 12 --temp 0 --threads 1 \
  2>/dev/null >"$dir/run.txt"
{ printf 'The herd runs'; cat "$dir/via-hub.txt"; echo; } >"$dir/expected.txt"
cmp -s "$dir/expected.txt" "$dir/run.txt" ||
  fail "B through the hub differs from herd run: $(cat "$dir/via-hub.txt") vs $(cat "$dir/run.txt")"

# The pod serves B now (and says so to the hub at once, not at the 30 s heartbeat).
status "$url/api/network" >/dev/null
python3 - "$dir/body" <<'PY' || fail "/api/network after the load: $(cat "$dir/body")"
import json, sys
n = json.load(open(sys.argv[1]))
p, = n["pods"]
assert [m["name"] for m in p["models"]] == ["model-b"], p
assert p["loading"] is None and n["loads"]["loads"] == [], n
assert p["decode_tokens_per_s"] > 0, p
PY
[ "$(status "$pod_url/health")" = 200 ] || fail "the pod's /health: $(cat "$dir/body")"
[ "$(status -d '{"model": "model-c"}' "$pod_url/api/load")" = 401 ] || fail "/api/load, no token"
echo "hub_load: B got 503 + Retry-After, was loaded on pod-1 after 3 requests, then answered as herd run"

kill -TERM "$serve_pid"
wait "$serve_pid" || fail "herd serve exited with $?"
kill -TERM "$hub_pid"
wait "$hub_pid" || fail "hub exited with $?"
echo "PASS"
