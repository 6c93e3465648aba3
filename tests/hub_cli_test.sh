#!/usr/bin/env bash
# herd hub as a user starts it: it listens, answers /health, keeps /v1/models behind its
# API keys, refuses a registration that is not one with a 400 naming the problem, shows an
# empty network; a `herd serve --hub` pod registers (signed with its node identity, with
# the speeds it measured) and is listed, still answers greedy text as `herd run` does,
# answers the same through the hub (OpenAI's, Anthropic's, the Responses and Ollama's APIs),
# and is dropped once it stops; bad flags are refused, and the hub stops on SIGTERM.
set -euo pipefail
herd=$(realpath "${1:?usage: hub_cli_test.sh path/to/herd}")
dir=$(mktemp -d)
pid= serve_pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
  rm -rf "$dir"
}
export XDG_CONFIG_HOME=$dir/config  # the pod's identity is created here, not in ~/.config
export XDG_DATA_HOME=$dir/data  # the hub's books likewise, not in ~/.local/share
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$dir/hub.log" ] && cat "$dir/hub.log" >&2; exit 1; }

"$herd" hub --port 0 --allow-private-pods --api-key k1 --api-key k2 --heartbeat 1 \
  --pod-timeout 3 2>"$dir/hub.log" &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$dir/hub.log" && break; sleep 0.05; done
url=$(grep -o "http://[0-9.]*:[0-9]*" "$dir/hub.log" | head -1)
[ -n "$url" ] || fail "hub did not say where it listens"
grep -q "(2 API keys)" "$dir/hub.log" || fail "hub did not count its keys"

status() { curl -s -o "$dir/body" -w '%{http_code}' "$@"; }
[ "$(status "$url/health")" = 200 ] || fail "/health"
grep -q '"pods":0' "$dir/body" || fail "/health: $(cat "$dir/body")"
[ "$(status "$url/v1/models")" = 401 ] || fail "/v1/models without a key"
[ "$(status -H "Authorization: Bearer nope" "$url/v1/models")" = 401 ] || fail "/v1/models, bad key"
[ "$(status -H "Authorization: Bearer k2" "$url/v1/models")" = 200 ] || fail "/v1/models with k2"
grep -q '"data":\[\]' "$dir/body" || fail "/v1/models: $(cat "$dir/body")"
[ "$(status -d '{"id": 1}' -H 'X-Herd-Signature: x' "$url/api/register")" = 400 ] ||
  fail "a bad registration was not refused: $(cat "$dir/body")"
grep -q "registration: field 'id': not a string" "$dir/body" || fail "400 body: $(cat "$dir/body")"
[ "$(status "$url/api/network")" = 200 ] || fail "/api/network"
grep -q '"pods":\[\]' "$dir/body" || fail "/api/network: $(cat "$dir/body")"

# A pod: herd serve --hub registers and is listed with what it measured.
model=$dir/pod-model.gguf
"$herd" synth --arch qwen3 --embd 128 --layers 2 --heads 4 --kv-heads 2 --type q4_0 \
  --out "$model" >/dev/null 2>&1 || fail "synth"
"$herd" serve --model "$model" --host 127.0.0.1 --port 0 --threads 1 --hub "$url" \
  --hub-name pod-a 2>"$dir/serve.log" &
serve_pid=$!
for _ in $(seq 200); do grep -q "registered with the hub" "$dir/serve.log" && break; sleep 0.05; done
grep -q "registered with the hub at $url as " "$dir/serve.log" || fail "pod: $(cat "$dir/serve.log")"
pod_url=$(sed -n 's|^serve: listening on \(http://127.0.0.1:[0-9]*\).*|\1|p' "$dir/serve.log")
[ "$(status -H "Authorization: Bearer k1" "$url/v1/models")" = 200 ] || fail "/v1/models"
grep -q '"id":"pod-model"' "$dir/body" && grep -q '"pods":1' "$dir/body" ||
  fail "/v1/models does not list the pod's model: $(cat "$dir/body")"
status "$url/api/network" >/dev/null
python3 - "$dir/body" "$pod_url" <<'PY' || fail "/api/network: $(cat "$dir/body")"
import json, sys
pods = json.load(open(sys.argv[1]))["pods"]
assert len(pods) == 1, pods
p = pods[0]
assert p["name"] == "pod-a" and p["url"] == sys.argv[2], p
assert p["decode_tokens_per_s"] > 0 and p["prefill_tokens_per_s"] > 0 and p["slots"] >= 1, p
assert [m["name"] for m in p["models"]] == ["pod-model"], p
PY
# Measuring its speed left the pod's answers as they were: greedy text equals herd run.
curl -s -o "$dir/done.json" -H 'Content-Type: application/json' \
  -d '{"prompt": "The herd runs", "max_tokens": 12, "temperature": 0}' "$pod_url/v1/completions"
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' \
  "$dir/done.json" >"$dir/served.txt" || fail "pod's completion: $(cat "$dir/done.json")"
"$herd" run --model "$model" --prompt "The herd runs" -n 12 --temp 0 --threads 1 2>/dev/null >"$dir/run.txt"
# herd run prints the prompt, the text and a newline (the random model's text may hold any
# byte, so files are compared, not shell strings).
{ printf 'The herd runs'; cat "$dir/served.txt"; echo; } >"$dir/expected.txt"
cmp -s "$dir/expected.txt" "$dir/run.txt" ||
  fail "the pod's greedy text differs from herd run: $(cat "$dir/served.txt") vs $(cat "$dir/run.txt")"
# The pod checks served tokens for a hub: its own greedy answer's are each the best, and the
# text it renders for them is the text it served; ids outside its vocabulary or beyond
# max_tokens cannot be scored (a failed check, saying why).
curl -s -o "$dir/ids.json" -H 'Content-Type: application/json' \
  -d '{"prompt": "The herd runs", "max_tokens": 12, "temperature": 0, "herd_token_ids": true}' \
  "$pod_url/v1/completions"
python3 - "$dir/ids.json" "$pod_url" <<'PY' || fail "/api/verify"
import json, sys, urllib.request, urllib.error
served = json.load(open(sys.argv[1]))
ids = served["herd"]["completion_token_ids"]
assert len(ids) == 12, ids
def verify(tokens):
    body = {"endpoint": "completions", "completion_token_ids": tokens,
            "request": {"prompt": "The herd runs", "max_tokens": 12, "temperature": 0}}
    req = urllib.request.Request(sys.argv[2] + "/api/verify", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
status, answer = verify(ids)
assert status == 200 and answer["temperature"] == 0, answer
assert [s["token"] for s in answer["scores"]] == ids, answer
assert all(s["probability"] == 1 and s["gap"] == 0 for s in answer["scores"]), answer
assert answer["content"] == served["choices"][0]["text"], (answer["content"], served)
status, answer = verify([10 ** 7])
assert status == 200 and "not of this model's vocabulary" in answer["unscorable"], answer
status, answer = verify(ids + ids[:1])
assert status == 200 and answer["unscorable"] == "13 ids for a request of max_tokens 12", answer
status, answer = verify(["x"])
assert status == 400 and answer["error"]["param"] == "completion_token_ids", answer
PY
# Through the hub: a client's request goes whole to the pod, and comes back as the pod's.
curl -s -o "$dir/via-hub.json" -H 'Content-Type: application/json' -H "Authorization: Bearer k1" \
  -d '{"model": "pod-model", "prompt": "The herd runs", "max_tokens": 12, "temperature": 0}' \
  "$url/v1/completions"
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' \
  "$dir/via-hub.json" >"$dir/via-hub.txt" || fail "completion through the hub: $(cat "$dir/via-hub.json")"
cmp -s "$dir/via-hub.txt" "$dir/served.txt" || fail "the hub's answer differs from the pod's"
# The other APIs, through the hub as directly: Anthropic's Messages, OpenAI's Responses and
# Ollama's chat and generate, whole and streamed, without herd's extension; the pod gives
# its tokens' ids in each API's answer, and checks them under that API's /api/verify name.
python3 - "$url" "$pod_url" <<'PY' || fail "the other APIs through the hub"
import json, sys, urllib.request
hub, pod = sys.argv[1], sys.argv[2]
def post(base, path, body, headers={}):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req) as r:
        return r.status, r.read().decode("utf-8", "replace")
question = [{"role": "user", "content": "The herd runs"}]
greedy = {"num_predict": 8, "temperature": 0}
apis = {  # path: (verify's endpoint, the request, its answer's text, its usage)
    "/v1/messages": ("messages", {"model": "pod-model", "max_tokens": 8, "temperature": 0,
                                  "messages": question},
                     lambda a: "".join(b["text"] for b in a["content"] if b["type"] == "text"),
                     lambda a: (a["usage"]["input_tokens"], a["usage"]["output_tokens"])),
    "/v1/responses": ("responses", {"model": "pod-model", "max_output_tokens": 8,
                                    "temperature": 0, "input": "The herd runs", "store": False},
                      lambda a: "".join(p["text"] for i in a["output"] if i["type"] == "message"
                                        for p in i["content"] if p["type"] == "output_text"),
                      lambda a: (a["usage"]["input_tokens"], a["usage"]["output_tokens"])),
    "/api/chat": ("ollama_chat", {"model": "pod-model", "options": greedy, "stream": False,
                                  "messages": question},
                  lambda a: a["message"]["content"],
                  lambda a: (a["prompt_eval_count"], a["eval_count"])),
    "/api/generate": ("ollama_generate", {"model": "pod-model:latest", "options": greedy,
                                          "stream": False, "prompt": "The herd runs"},
                      lambda a: a["response"],
                      lambda a: (a["prompt_eval_count"], a["eval_count"])),
}
for path, (endpoint, body, text, usage) in apis.items():
    status, direct = post(pod, path, dict(body, herd_token_ids=True))
    served = json.loads(direct)
    ids = served["herd"]["completion_token_ids"]
    assert status == 200 and 0 < len(ids) <= 8 and usage(served)[1] == len(ids), (path, served)
    status, via = post(hub, path, body, {"Authorization": "Bearer k1"})
    answer = json.loads(via)
    assert status == 200 and "herd" not in answer, (path, via)
    assert text(answer) == text(served) and usage(answer) == usage(served), (path, answer, served)
    status, streamed = post(hub, path, dict(body, stream=True), {"x-api-key": "k1"})
    assert status == 200 and "herd" not in streamed, (path, streamed)
    assert ("message_stop" in streamed or "response.completed" in streamed
            or "response.incomplete" in streamed or '"done":true' in streamed), (path, streamed)
    check = {"endpoint": endpoint, "request": body, "completion_token_ids": ids}
    status, checked = post(pod, "/api/verify", check)
    checked = json.loads(checked)
    assert status == 200 and [s["token"] for s in checked["scores"]] == ids, (path, checked)
    assert all(s["gap"] <= 0.5 for s in checked["scores"]), (path, checked)
    assert checked["content"] == text(served), (path, checked["content"], text(served))
PY
# Stopped, it is dropped after --pod-timeout (3 s) without a registration.
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "herd serve exited with $?"
serve_pid=
for _ in $(seq 100); do
  status "$url/api/network" >/dev/null
  grep -q '"pods":\[\]' "$dir/body" && break
  sleep 0.1
done
grep -q '"pods":\[\]' "$dir/body" || fail "the stopped pod is still listed: $(cat "$dir/body")"
echo "hub_cli: pod-a registered, listed, answered as herd run directly and through the hub," \
  "dropped after it stopped"

kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "hub ignored SIGTERM"
wait "$pid" || fail "hub exited with $?"
pid=

code=0
"$herd" hub --heartbeat 30 --pod-timeout 20 2>"$dir/err" || code=$?
[ "$code" -ne 0 ] && grep -q "must be longer than --heartbeat" "$dir/err" ||
  fail "bad timeouts accepted: $(cat "$dir/err")"
echo "PASS"
