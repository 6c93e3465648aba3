#!/usr/bin/env bash
# Measures what the hub's check thresholds (src/hub/checks.h) must allow: a hub checking
# every request (--check-rate 1) of honest pods that run one model on other kernels and
# thread counts (scalar, AVX2 1 thread, the best ISA 2 threads), and of a cheater serving a
# smaller model under the same name. Prints the least plausible token of all passed checks
# (lowest probability of a sampled token, largest logit gap of a greedy one) and how many
# of the cheater's tokens were implausible. docs/network.md records the figures.
#
#   bench/check_thresholds.sh build/herd [requests=150] [max_tokens=48]
set -euo pipefail
herd=$(realpath "${1:?usage: check_thresholds.sh path/to/herd [requests] [max_tokens]}")
requests=${2:-150}
max_tokens=${3:-48}
source "$(dirname "$0")/../tests/hub_lib.sh"
hub_lib_init

synth_model "$dir/model.gguf" --embd 256 --layers 4 --heads 8 --kv-heads 2
synth_model "$dir/small.gguf"
hub_start hub --db "$dir/hub.db" --check-rate 1 --heartbeat 2 --pod-timeout 30
url=$hub_url

pod() {
  local name=$1 model=$2
  shift 2
  pod_start "$name" "$dir/$model.gguf" --alias m --hub "$url" --hub-name "$name" "$@"
  wait_registered "$name" "$url"
}
pod scalar model --isa scalar --threads 1
pod avx2 model --isa avx2 --threads 1
pod best model --threads 2
pod cheater small --threads 1

# Greedy and sampled, herd's sampling defaults and the whole vocabulary (no top-k, top-p,
# min-p: the widest an honest sampler draws).
for i in $(seq "$requests"); do
  case $((i % 4)) in
    0) sampling='"temperature": 0' ;;
    1) sampling='"temperature": 0.7' ;;
    2) sampling='"temperature": 1.0, "top_k": 0, "top_p": 1, "min_p": 0' ;;
    3) sampling='"temperature": 1.5, "top_k": 0, "top_p": 1, "min_p": 0' ;;
  esac
  curl -s -o /dev/null "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"Question $i: what is $((i * 7919 % 1000))?\"}], \"max_tokens\": $max_tokens, $sampling}"
done
for _ in $(seq 600); do
  queued=$(curl -s "$url/api/network" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hub"]["verification"]["queued"])')
  [ "$queued" = 0 ] && break
  sleep 0.1
done
sleep 1
curl -s "$url/api/network" | python3 -c '
import json, sys
n = json.load(sys.stdin)
v = n["hub"]["verification"]
print("checks %d, failed %d, disagreements %d" % (v["checked"], v["failed"], v["disagreements"]))
print("passed checks: lowest sampled-token probability %.3g, lowest z %.2f, largest greedy gap %.4g"
      % (v["passed_min_probability"], v["passed_min_z"], v["passed_max_gap"]))
if v["failed_tokens"]:
    print("failed checks: %d of %d tokens implausible (%.0f%%)" % (v["failed_implausible"],
          v["failed_tokens"], 100.0 * v["failed_implausible"] / v["failed_tokens"]))
for p in sorted(n["pods"], key=lambda p: p["name"]):
    print("  %-8s requests %3d checked %3d passed %3d failed %d" % (p["name"], p["requests"],
          p["checked"], p["verified"], p["failed_verifications"]))
'

# The cheater's answers checked directly on an honest pod, by request kind: how often one
# checked request of a smaller model's is caught (the same rules as checks.cpp).
cheater=$(sed -n 's|^serve: listening on \(http://127.0.0.1:[0-9]*\).*|\1|p' "$dir/cheater.log")
checker=$(sed -n 's|^serve: listening on \(http://127.0.0.1:[0-9]*\).*|\1|p' "$dir/avx2.log")
python3 - "$cheater" "$checker" "$requests" "$max_tokens" <<'PY'
import json, math, sys, urllib.request
cheater, checker, n, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)
kinds = {0: {"temperature": 0}, 1: {"temperature": 0.7},
         2: {"temperature": 1.0, "top_k": 0, "top_p": 1, "min_p": 0},
         3: {"temperature": 1.5, "top_k": 0, "top_p": 1, "min_p": 0}}
caught = {k: [0, 0] for k in kinds}
for i in range(n):
    k = i % 4
    request = {"model": "m", "max_tokens": max_tokens,
               "messages": [{"role": "user", "content": "Question %d: what is %d?" % (i, i * 7919 % 1000)}]}
    request.update(kinds[k])
    answer = post(cheater + "/v1/chat/completions", dict(request, herd_token_ids=True))
    ids = answer["herd"]["completion_token_ids"]
    if not ids:
        continue
    check = post(checker + "/api/verify", {"endpoint": "chat", "request": request, "completion_token_ids": ids})
    greedy = check["temperature"] <= 0
    bad = False
    surprise = variance = 0.0
    for s in check["scores"]:
        if greedy:
            bad = bad or s["gap"] > 0.5
        else:
            bad = bad or s["probability"] < 1e-9
            surprise += math.log(max(s["probability"], 1e-300)) + s["entropy"]
            variance += s["variance"] + 0.01
    if not greedy and variance > 0 and surprise / math.sqrt(variance) < -6:
        bad = True
    caught[k][0] += bad
    caught[k][1] += 1
for k, (c, t) in caught.items():
    print("cheater, %-45s caught in %3d of %3d checked requests" % (json.dumps(kinds[k]), c, t))
PY

