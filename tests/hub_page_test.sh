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
source "$here/hub_lib.sh"
hub_lib_init

hub_start hub --heartbeat 1 --pod-timeout 3
url=$hub_url
# pod NAME MODEL: a pod serving MODEL.gguf, a model of its own, under its own identity.
pod() {
  synth_model "$dir/$2.gguf"
  pod_start "$2" "$dir/$2.gguf" --threads 1 --hub "$url" --hub-name "$1"
}
pod pod-a alpha
beta_index=${#pids[@]}  # the pod the page test kills
pod '<b>x</b>' beta
for log in alpha beta; do wait_registered "$log" "$url"; done

code=$(curl -s -o "$dir/answer.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"model": "alpha", "prompt": "The herd runs", "max_tokens": 8, "temperature": 0}' \
  "$url/v1/completions")
[ "$code" = 200 ] || fail "completion through the hub: $code $(cat "$dir/answer.json")"

# The test kills the second pod (SIGKILL); the shell's "Killed" notice for it is silenced
# (node's own stderr goes through fd 3).
code=0
{
  HERD_HUB_URL=$url HERD_KILL_PID=${pids[$beta_index]} node "$here/node/hub_page_test.mjs" 2>&3 || code=$?
  kill -KILL "${pids[$beta_index]}" 2>/dev/null || true
  wait "${pids[$beta_index]}" || true
} 3>&2 2>/dev/null
unset "pids[$beta_index]"
[ "$code" -eq 0 ] || fail "hub_page_test.mjs"
echo "PASS"
