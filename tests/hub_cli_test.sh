#!/usr/bin/env bash
# herd hub as a user starts it: it listens, answers /health, keeps /v1/models behind its
# API keys, refuses a registration that is not one with a 400 naming the problem, shows an
# empty network, refuses bad flags, and stops on SIGTERM. (Signed registrations, the
# heartbeat and expiry: src/hub/hub_server_test.cpp.)
set -euo pipefail
herd=$(realpath "${1:?usage: hub_cli_test.sh path/to/herd}")
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$dir/hub.log" ] && cat "$dir/hub.log" >&2; exit 1; }

"$herd" hub --port 0 --api-key k1 --api-key k2 2>"$dir/hub.log" &
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
