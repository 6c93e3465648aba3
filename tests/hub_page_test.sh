#!/usr/bin/env bash
# The hub's page in headless Chromium (tests/node/hub_page_test.mjs): a hub and two
# `herd serve --hub` pods on small synthetic models, pod-a (model alpha) and one named
# "<b>x</b>" (model beta), a completion sent through the hub; the page is then checked, and
# the second pod killed (the hub drops it after --pod-timeout 3). HERD_SCREENSHOT=file.png
# saves a picture of the page.
set -euo pipefail
herd=$(realpath "${1:?usage: hub_page_test.sh path/to/herd}")
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node/node_modules/playwright-core" ] ||
  { echo "FAIL: tests/node has no node_modules: run scripts/install-deps"; exit 1; }
dir=$(mktemp -d)
hub_pid= pids=()
cleanup() {
  for p in "${pids[@]}" $hub_pid; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
export XDG_DATA_HOME=$dir/data  # the hub's books, not in ~/.local/share
fail() {
  echo "FAIL: $*" >&2
  for log in "$dir"/*.log; do echo "--- $log" >&2; tail -20 "$log" >&2; done
  exit 1
}

"$herd" hub --port 0 --heartbeat 1 --pod-timeout 3 2>"$dir/hub.log" &
hub_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$dir/hub.log" && break; sleep 0.05; done
url=$(grep -o "http://[0-9.]*:[0-9]*" "$dir/hub.log" | head -1)
[ -n "$url" ] || fail "hub did not say where it listens"

# pod NAME MODEL: a pod serving MODEL.gguf under its own identity (each its own
# XDG_CONFIG_HOME: pods with one identity would be one pod to the hub).
pod() {
  "$herd" synth --arch qwen3 --embd 128 --layers 2 --heads 4 --kv-heads 2 --type q4_0 \
    --out "$dir/$2.gguf" >/dev/null 2>&1 || fail "synth $2"
  XDG_CONFIG_HOME=$dir/config-$2 "$herd" serve --model "$dir/$2.gguf" --host 127.0.0.1 --port 0 \
    --threads 1 --hub "$url" --hub-name "$1" 2>"$dir/$2.log" &
  pids+=($!)
}
pod pod-a alpha
pod '<b>x</b>' beta
for log in alpha beta; do
  for _ in $(seq 400); do grep -q "registered with the hub" "$dir/$log.log" && break; sleep 0.05; done
  grep -q "registered with the hub at $url" "$dir/$log.log" || fail "pod $log did not register"
done

code=$(curl -s -o "$dir/answer.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"model": "alpha", "prompt": "The herd runs", "max_tokens": 8, "temperature": 0}' \
  "$url/v1/completions")
[ "$code" = 200 ] || fail "completion through the hub: $code $(cat "$dir/answer.json")"

# The test kills the second pod (SIGKILL); the shell's "Killed" notice for it is silenced
# (node's own stderr goes through fd 3).
code=0
{
  HERD_HUB_URL=$url HERD_KILL_PID=${pids[1]} node "$here/node/hub_page_test.mjs" 2>&3 || code=$?
  kill -KILL "${pids[1]}" 2>/dev/null || true
  wait "${pids[1]}" || true
} 3>&2 2>/dev/null
unset 'pids[1]'
[ "$code" -eq 0 ] || fail "hub_page_test.mjs"
echo "PASS"
