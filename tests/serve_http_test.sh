#!/usr/bin/env bash
# herd serve over raw HTTP (curl): SSE framing, error statuses in OpenAI's shape, API keys,
# the queue limit, a client that disconnects mid-stream, greedy output equal to `herd run`,
# GET /api/cluster in one process and across nodes, and a graceful stop that finishes the
# request in flight.
set -euo pipefail
herd=${1:?usage: serve_http_test.sh path/to/herd}
herd=$(realpath "$herd")
dir=$(mktemp -d)
source "$(dirname "$0")/serve_lib.sh"
trap 'serve_cleanup; rm -rf "$dir"' EXIT
serve_model "$dir"

# js FILE EXPR: evaluates EXPR with `j` the JSON in FILE, prints the result.
js() { node -e "const j = JSON.parse(require('fs').readFileSync('$1', 'utf8')); console.log($2)"; }
# post PATH BODY [curl args]: the status code; the body lands in $dir/body, headers in $dir/headers.
post() {
  local path=$1 body=$2; shift 2
  curl -s -o "$dir/body" -D "$dir/headers" -w '%{http_code}' -H 'Content-Type: application/json' \
    -H "Authorization: Bearer secret" "$@" -d "$body" "$url$path"
}
expect_error() {  # expect_error STATUS PARAM PATH BODY [curl args]
  local status=$1 param=$2 path=$3 body=$4; shift 4
  local got
  got=$(post "$path" "$body" "$@")
  [ "$got" = "$status" ] || fail "$path $body: status $got, expected $status: $(cat "$dir/body")"
  [ "$(js "$dir/body" 'typeof j.error.message')" = string ] || fail "no error.message: $(cat "$dir/body")"
  [ "$(js "$dir/body" 'j.error.param')" = "$param" ] || fail "param of $body: $(cat "$dir/body")"
}

# Keys from the command line and from a private file (issue 28: a file keeps them out of the
# process list); a file every user may read is refused before the model loads.
printf '# serve keys\n\nfile-key\n' >"$dir/keys"
chmod 644 "$dir/keys"
if "$herd" serve --model "$model" --port 0 --api-key-file "$dir/keys" 2>"$dir/refused.log"; then
  fail "a world-readable key file was accepted"
fi
grep -q "readable by every user" "$dir/refused.log" || fail "refusal: $(cat "$dir/refused.log")"
chmod 600 "$dir/keys"
serve_start --api-key secret --api-key-file "$dir/keys" --slots 2 --queue 2 --ctx 4096 --max-body 60000
if [ -r "/proc/$serve_pid/cmdline" ]; then args=$(tr '\0' ' ' <"/proc/$serve_pid/cmdline"); else
  args=$(ps -ww -o args= -p "$serve_pid"); fi
case "$args" in *--api-key-file*) ;; *) fail "no command line read: $args" ;; esac
case "$args" in *file-key*) fail "the file's key is on the command line: $args" ;; esac
hello='{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "temperature": 0}'

# Authentication.
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/models")" = 401 ] || fail "no key accepted"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$url/v1/models")" = 401 ] ||
  fail "wrong key accepted"
[ "$(curl -s -o "$dir/models" -w '%{http_code}' -H 'Authorization: Bearer secret' "$url/v1/models")" = 200 ] ||
  fail "/v1/models"
[ "$(js "$dir/models" 'j.data[0].id')" = serve-e2e ] || fail "model id: $(cat "$dir/models")"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer file-key' "$url/v1/models")" = 200 ] ||
  fail "the key file's key was refused"
for almost in file-ke file-key2 secre secrett; do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $almost" "$url/v1/models")" = 401 ] ||
    fail "key '$almost' accepted"
done

# A chat completion, and the same streamed.
[ "$(post /v1/chat/completions "$hello")" = 200 ] || fail "chat: $(cat "$dir/body")"
cp "$dir/body" "$dir/chat.json"
[ "$(js "$dir/chat.json" 'j.usage.prompt_tokens + j.usage.completion_tokens === j.usage.total_tokens')" = true ] ||
  fail "usage: $(cat "$dir/chat.json")"
[ "$(js "$dir/chat.json" 'j.object')" = chat.completion ] || fail "object"

stream='{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}'
[ "$(post /v1/chat/completions "$stream" -N)" = 200 ] || fail "stream: $(cat "$dir/body")"
grep -qi '^content-type: text/event-stream' "$dir/headers" || fail "stream content type: $(cat "$dir/headers")"
# Framing: "data: <json>" lines each followed by a blank line, ending with data: [DONE].
node - "$dir/body" "$dir/chat.json" <<'JS' || fail "SSE framing: $(head -c 2000 "$dir/body")"
const fs = require('fs');
const raw = fs.readFileSync(process.argv[2], 'utf8');
const whole = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
if (!raw.endsWith('data: [DONE]\n\n')) throw new Error('no final [DONE]');
const events = raw.slice(0, -2).split('\n\n');
let text = '', finish = null, usage = null, role = null;
for (const e of events.slice(0, -1)) {
  if (!e.startsWith('data: ') || e.includes('\n')) throw new Error('bad event: ' + JSON.stringify(e));
  const j = JSON.parse(e.slice(6));
  if (j.object !== 'chat.completion.chunk') throw new Error('object ' + j.object);
  if (j.usage) { usage = j.usage; continue; }
  const c = j.choices[0];
  if (c.delta.role) role = c.delta.role;
  if (c.delta.content) text += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
}
if (role !== 'assistant') throw new Error('no assistant role');
if (text !== whole.choices[0].message.content) throw new Error('streamed text differs: ' + JSON.stringify([text, whole.choices[0].message.content]));
if (finish !== whole.choices[0].finish_reason) throw new Error('finish ' + finish);
if (!usage || usage.completion_tokens !== whole.usage.completion_tokens) throw new Error('usage ' + JSON.stringify(usage));
JS

# Greedy output equals `herd run` for the same prompt (completions) and the same message (chat).
[ "$(post /v1/completions '{"prompt": "The herd runs", "max_tokens": 24, "temperature": 0}')" = 200 ] ||
  fail "completions: $(cat "$dir/body")"
js "$dir/body" 'j.choices[0].text' > "$dir/served.txt"
"$herd" run --model "$model" --prompt "The herd runs" -n 24 --temp 0 --threads 2 2>/dev/null > "$dir/run.txt"
# herd run prints the prompt, the text and a newline; console.log adds the newline.
[ "The herd runs$(cat "$dir/served.txt")" = "$(cat "$dir/run.txt")" ] ||
  fail "completion differs from herd run: $(od -c "$dir/served.txt" | head) vs $(od -c "$dir/run.txt" | head)"
js "$dir/chat.json" 'j.choices[0].message.content' > "$dir/served-chat.txt"
"$herd" run --model "$model" --chat --prompt "Hello" -n 16 --temp 0 --threads 2 2>/dev/null > "$dir/run-chat.txt"
cmp -s "$dir/served-chat.txt" "$dir/run-chat.txt" || fail "chat differs from herd run --chat"

# tool_choice "required" and a named function hold: the reply is a call of one of the tools,
# although the synthetic model writes random text (its arguments may then be any string).
tools='"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}, {"type": "function", "function": {"name": "get_time", "parameters": {}}}]'
for choice in '"required"' '{"type": "function", "function": {"name": "get_time"}}'; do
  for seed in 1 2 3; do
    body="{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}], $tools, \"tool_choice\": $choice, \"max_tokens\": 24, \"seed\": $seed}"
    [ "$(post /v1/chat/completions "$body")" = 200 ] || fail "tool_choice $choice: $(cat "$dir/body")"
    [ "$(js "$dir/body" 'j.choices[0].finish_reason')" = tool_calls ] || fail "tool_choice $choice: $(cat "$dir/body")"
    name=$(js "$dir/body" 'j.choices[0].message.tool_calls[0].function.name')
    case $choice in
      *get_time*) [ "$name" = get_time ] || fail "the named function was not called: $(cat "$dir/body")" ;;
      *) [ "$name" = get_weather ] || [ "$name" = get_time ] || fail "a call of no tool: $(cat "$dir/body")" ;;
    esac
    [ "$(js "$dir/body" 'typeof j.choices[0].message.tool_calls[0].function.arguments')" = string ] ||
      fail "arguments are not a string: $(cat "$dir/body")"
    [ "$(js "$dir/body" 'j.choices[0].message.tool_calls[0].id.startsWith("call_")')" = true ] ||
      fail "tool call id: $(cat "$dir/body")"
    # The forced opening is the prompt's, never the reply's content.
    js "$dir/body" 'j.choices[0].message.content || ""' | grep -q '<tool_call>' &&
      fail "the forced opening shows as content: $(cat "$dir/body")"
  done
done
# response_format: the random model writes no JSON by itself; held to a schema (greedy and
# sampled, streamed and not) its reply parses and matches it, and ends when whole (stop).
person='{"type": "object", "properties": {"name": {"enum": ["Ann", "Bob"]}, "age": {"type": "integer"}, "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}, "score": {"type": ["number", "null"]}}, "required": ["name", "age", "ok", "tags", "score"], "additionalProperties": false}'
matches_person='typeof j === "object" && ["Ann", "Bob"].includes(j.name) && Number.isInteger(j.age) && typeof j.ok === "boolean" && Array.isArray(j.tags) && j.tags.length <= 3 && j.tags.every((t) => ["a", "b", "c"].includes(t)) && (j.score === null || typeof j.score === "number") && Object.keys(j).length === 5'
free='{"messages": [{"role": "user", "content": "Who?"}], "max_tokens": 64, "temperature": 0}'
[ "$(post /v1/chat/completions "$free")" = 200 ] || fail "free reply: $(cat "$dir/body")"
js "$dir/body" 'j.choices[0].message.content' > "$dir/free.txt"
node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$dir/free.txt" 2>/dev/null &&
  fail "the model writes JSON by itself; the test proves nothing: $(cat "$dir/free.txt")"
for temperature in 0 1; do
  for seed in 1 2 3; do
    body="{\"messages\": [{\"role\": \"user\", \"content\": \"Who?\"}], \"max_tokens\": 300, \"temperature\": $temperature, \"seed\": $seed, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"person\", \"strict\": true, \"schema\": $person}}}"
    [ "$(post /v1/chat/completions "$body")" = 200 ] || fail "json_schema: $(cat "$dir/body")"
    [ "$(js "$dir/body" 'j.choices[0].finish_reason')" = stop ] || fail "json_schema did not end when whole: $(cat "$dir/body")"
    js "$dir/body" 'j.choices[0].message.content' > "$dir/person.json"
    [ "$(js "$dir/person.json" "$matches_person")" = true ] || fail "reply does not match the schema: $(cat "$dir/person.json")"
  done
done
body="{\"messages\": [{\"role\": \"user\", \"content\": \"Who?\"}], \"max_tokens\": 300, \"seed\": 9, \"stream\": true, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"person\", \"schema\": $person}}}"
[ "$(post /v1/chat/completions "$body" -N)" = 200 ] || fail "json_schema stream: $(cat "$dir/body")"
node - "$dir/body" > "$dir/person.json" <<'JS' || fail "json_schema stream: $(cat "$dir/body")"
const events = require('fs').readFileSync(process.argv[2], 'utf8').split('\n\n').filter((e) => e.startsWith('data: {'));
let text = '', finish = null;
for (const e of events) {
  const c = JSON.parse(e.slice(6)).choices[0];
  if (!c) continue;
  text += c.delta.content ?? '';
  finish = c.finish_reason ?? finish;
}
if (finish !== 'stop') throw new Error('finish ' + finish);
console.log(text);
JS
[ "$(js "$dir/person.json" "$matches_person")" = true ] || fail "streamed reply does not match: $(cat "$dir/person.json")"
# The legacy completions take response_format too.
body="{\"prompt\": \"Who?\", \"max_tokens\": 300, \"seed\": 5, \"temperature\": 1, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"person\", \"schema\": $person}}}"
[ "$(post /v1/completions "$body")" = 200 ] || fail "completions json_schema: $(cat "$dir/body")"
[ "$(js "$dir/body" 'j.choices[0].finish_reason')" = stop ] || fail "completions json_schema did not end when whole: $(cat "$dir/body")"
js "$dir/body" 'j.choices[0].text' > "$dir/person.json"
[ "$(js "$dir/person.json" "$matches_person")" = true ] || fail "completion does not match the schema: $(cat "$dir/person.json")"
# json_object: one object (a free key may run to max_tokens: then the text is cut, "length").
body='{"messages": [{"role": "user", "content": "Who?"}], "max_tokens": 200, "seed": 4, "response_format": {"type": "json_object"}}'
[ "$(post /v1/chat/completions "$body")" = 200 ] || fail "json_object: $(cat "$dir/body")"
case $(js "$dir/body" 'j.choices[0].finish_reason') in
  stop) [ "$(js "$dir/body" 'typeof JSON.parse(j.choices[0].message.content)')" = object ] ||
    fail "json_object: $(cat "$dir/body")" ;;
  length) [ "$(js "$dir/body" 'j.choices[0].message.content[0]')" = '{' ] || fail "json_object: $(cat "$dir/body")" ;;
  *) fail "json_object finish: $(cat "$dir/body")" ;;
esac
expect_error 400 response_format.json_schema.schema.properties.when.format /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}}}}'
expect_error 400 response_format.type /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}'
# A forced call's arguments are held to the function's parameters.
weather='{"type": "object", "properties": {"unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["unit", "days"], "additionalProperties": false}'
for choice in '"required"' '{"type": "function", "function": {"name": "get_weather"}}'; do
  body="{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": $weather}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": $weather}}], \"tool_choice\": $choice, \"max_tokens\": 100, \"seed\": 5}"
  [ "$(post /v1/chat/completions "$body")" = 200 ] || fail "constrained call: $(cat "$dir/body")"
  [ "$(js "$dir/body" 'j.choices[0].message.tool_calls.length')" = 1 ] || fail "constrained call: $(cat "$dir/body")"
  js "$dir/body" 'j.choices[0].message.tool_calls[0].function.arguments' > "$dir/args.json"
  [ "$(js "$dir/args.json" '["c", "f"].includes(j.unit) && Number.isInteger(j.days) && Object.keys(j).length === 2')" = true ] ||
    fail "arguments do not match the parameters: $(cat "$dir/body")"
done

expect_error 400 tool_choice /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}'
expect_error 400 tool_choice.function.name /v1/chat/completions \
  "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], $tools, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}"

# Errors: status, OpenAI's shape, the field named.
expect_error 400 null /v1/chat/completions '{"messages": '
expect_error 400 temperature /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}'
expect_error 400 messages /v1/chat/completions '{"messages": 3}'
expect_error 404 model /v1/chat/completions '{"model": "gpt-17", "messages": [{"role": "user", "content": "x"}]}'
long=$(printf "w %.0s" $(seq 1 10000))
expect_error 400 prompt /v1/completions "{\"prompt\": \"$long\"}"
grep -q 'context holds 4096' "$dir/body" || fail "prompt too long names no numbers: $(cat "$dir/body")"
big=$(head -c 70000 /dev/zero | tr "\\0" x)
expect_error 413 null /v1/completions "{\"prompt\": \"$big\"}"
[ "$(curl -s -o "$dir/body" -w '%{http_code}' -H 'Authorization: Bearer nope' -d '{"prompt": "x"}' \
  "$url/v1/completions")" = 401 ] || fail "a wrong key was accepted"
[ "$(js "$dir/body" 'j.error.code')" = invalid_api_key ] || fail "401 body: $(cat "$dir/body")"

# Queue full: 2 slots and 2 waiting places are taken by long streams; the next is refused.
pids=()
for i in 1 2 3 4; do
  curl -sN -H 'Authorization: Bearer secret' -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"Stream $i\", \"max_tokens\": 4000, \"ignore_eos\": true, \"stream\": true}" \
    "$url/v1/completions" > "$dir/long$i.txt" &
  pids+=($!)
done
# Both counts at once: a request is counted as queued until the scheduler admits it, so
# "queued":2 alone may still be the first two (a slow server, e.g. under ASan, shows it).
for _ in $(seq 1 100); do
  curl -s "$url/health" | grep -q '"queued":2,"running":2' && break
  sleep 0.05
done
curl -s "$url/health" | grep -q '"queued":2,"running":2' ||
  fail "two requests are not running and two waiting: $(curl -s "$url/health")"
expect_error 503 null /v1/completions '{"prompt": "one more", "max_tokens": 2}'
grep -qi '^retry-after:' "$dir/headers" || fail "503 without Retry-After"

# Clients that go away free their slots: nothing runs or waits soon after.
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
for _ in $(seq 1 100); do
  curl -s "$url/health" | grep -q '"queued":0,"running":0' && break
  sleep 0.05
done
curl -s "$url/health" | grep -q '"queued":0,"running":0' || fail "disconnected streams still hold slots: $(curl -s "$url/health")"
for i in 1 2; do
  grep -q '\[DONE\]' "$dir/long$i.txt" && fail "stream $i ran to its end although its client left"
done

# A non-streaming client that goes away frees its slot as soon: its request is cancelled
# (it would otherwise run all its 4000 tokens, which /metrics would count).
tokens() { curl -s "$url/metrics" | sed -n 's/^herd_completion_tokens_total \([0-9]*\).*/\1/p'; }
before=$(tokens)
curl -s -H 'Authorization: Bearer secret' -H 'Content-Type: application/json' \
  -d '{"prompt": "Hold on", "max_tokens": 4000, "ignore_eos": true}' "$url/v1/completions" > /dev/null &
holder=$!
for _ in $(seq 1 100); do
  curl -s "$url/health" | grep -q '"running":1' && break
  sleep 0.02
done
curl -s "$url/health" | grep -q '"running":1' || fail "the non-streaming request does not run: $(curl -s "$url/health")"
sleep 0.1
kill "$holder"
wait "$holder" 2>/dev/null || true
freed=0
for _ in $(seq 1 40); do  # 2 seconds
  curl -s "$url/health" | grep -q '"queued":0,"running":0' && { freed=1; break; }
  sleep 0.05
done
[ "$freed" = 1 ] || fail "a gone non-streaming client still holds its slot: $(curl -s "$url/health")"
generated=$(($(tokens) - before))
[ "$generated" -lt 4000 ] || fail "the request of a gone client ran to its end ($generated tokens)"

# Metrics, the page.
curl -s "$url/metrics" > "$dir/metrics"
for m in herd_requests_total herd_completion_tokens_total herd_queue_depth herd_tokens_per_second \
  herd_time_to_first_token_seconds_bucket; do
  grep -q "^$m" "$dir/metrics" || fail "/metrics has no $m"
done
grep -q 'endpoint="completions",status="503"' "$dir/metrics" || fail "/metrics does not count the 503"
curl -s "$url/" | grep -qi '<html' || fail "/ is not the page"

# The pod in one process (no key needed, like /api/node): one node up, one stage holding
# every layer, per-stage figures from the passes so far.
[ "$(curl -s -o "$dir/cluster.json" -w '%{http_code}' "$url/api/cluster")" = 200 ] || fail "/api/cluster"
[ "$(js "$dir/cluster.json" "['state', 'reason', 'parallel', 'plan', 'nodes', 'stages', 'forward_seconds',
  'events', 'model', 'metrics'].filter((k) => !(k in j)).join(',')")" = "" ] ||
  fail "/api/cluster keys: $(cat "$dir/cluster.json")"
[ "$(js "$dir/cluster.json" "[j.state, j.parallel, j.nodes.length, j.nodes[0].state, j.plan.stages.length,
  j.plan.stages[0].layers.join('-'), j.plan.stages[0].ranks[0].node, j.events.length].join(' ')")" = \
  "ok single 1 up 1 0-2 0 0" ] || fail "/api/cluster one node: $(cat "$dir/cluster.json")"
[ "$(js "$dir/cluster.json" "j.stages[0].tokens > 0 && j.stages[0].ms_per_token > 0 &&
  j.stages[0].tokens_per_second > 0 && j.nodes[0].memory_used_bytes === j.plan.stages[0].ranks[0].memory_bytes &&
  j.nodes[0].memory_used_bytes > 0")" = true ] || fail "/api/cluster figures: $(cat "$dir/cluster.json")"

# Graceful stop: SIGTERM while a request streams; it still ends with [DONE].
curl -sN -H 'Authorization: Bearer secret' -H 'Content-Type: application/json' \
  -d '{"prompt": "Last", "max_tokens": 150, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}' \
  "$url/v1/completions" > "$dir/last.txt" &
last=$!
for _ in $(seq 1 100); do
  grep -q '"text"' "$dir/last.txt" 2>/dev/null && break
  sleep 0.02
done
serve_stop
wait "$last" || fail "the last client failed"
grep -q 'data: \[DONE\]' "$dir/last.txt" || fail "the stream in flight was cut at shutdown"
grep -q '"completion_tokens":150' "$dir/last.txt" || fail "the stream in flight lost tokens"
grep -q '"finish_reason":"length"' "$dir/last.txt" || fail "the stream in flight did not finish"

# Across nodes: two herd node processes hold the model's layers (a 2-stage pipeline: plain
# "pipeline" may leave a node out when their measured bandwidths differ), the server only
# coordinates; greedy output still equals `herd run` in one process, and the page's node
# view lists the stages.
node_pids=()
trap 'serve_cleanup; kill "${node_pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
peers=""
for i in 1 2; do
  "$herd" node --listen 127.0.0.1:0 --threads 1 --name "serve-node-$i" \
    --cache-dir "$dir/cache" 2>"$dir/node$i.log" &
  node_pids+=($!)
done
for i in 1 2; do
  addr=""
  for _ in $(seq 1 200); do
    # The node's log may not exist yet: its background shell opens it when it runs.
    addr=$(sed -n 's|.* listening on \(127.0.0.1:[0-9]*\).*|\1|p' "$dir/node$i.log" 2>/dev/null ||
      true)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || fail "node $i did not start: $(cat "$dir/node$i.log")"
  peers="$peers${peers:+,}$addr"
done
serve_start --api-key secret --slots 2 --peers "$peers" --no-local --parallel pipeline:2
[ "$(post /v1/completions '{"prompt": "The herd runs", "max_tokens": 24, "temperature": 0}')" = 200 ] ||
  fail "completions across nodes: $(cat "$dir/body")"
js "$dir/body" 'j.choices[0].text' > "$dir/served-peers.txt"
cmp -s "$dir/served.txt" "$dir/served-peers.txt" || fail "across nodes the reply differs"
curl -s "$url/api/node" > "$dir/node.json"
[ "$(js "$dir/node.json" 'j.node.stages.length')" = 2 ] || fail "/api/node stages: $(cat "$dir/node.json")"
curl -s "$url/api/cluster" > "$dir/cluster.json"
[ "$(js "$dir/cluster.json" "[j.state, j.plan.stages.length, j.stages.length,
  j.nodes.filter((n) => n.state === 'up').map((n) => n.name).sort().join(',')].join(' ')")" = \
  "ok 2 2 serve-node-1,serve-node-2" ] || fail "/api/cluster across nodes: $(cat "$dir/cluster.json")"
serve_stop
echo "serve_http_test: all checks passed"
