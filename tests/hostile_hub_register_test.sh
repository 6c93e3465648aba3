#!/usr/bin/env bash
# Registrations as an attacker sends them (issue 28), signed by a test tool, against real
# hubs on loopback. Each attack gets its status and the hub stays up:
#   a hub that does not allow private pods: a port 99999999999 (400 naming it; it used to
#     abort the hub at the next heartbeat), pods at loopback, private, link-local (cloud
#     metadata), IPv6 loopback, IPv4-mapped and numeric-spelled addresses (403), and a
#     flood of 500 new identities x 64 models from one address (429 past the limit);
#   a hub with --allow-private-pods: a replay of a registration (403), one identity at two
#     URLs (409 naming both), round trips only for pods that answer a herd /health (a port
#     that is open but not herd's shows as one that is closed), and 500 x 64 floods, again
#     and again, leaving the hub's memory where the first left it.
set -euo pipefail
herd=$(realpath "${1:?usage: hostile_hub_register_test.sh path/to/herd path/to/hub_register_tool}")
tool=$(realpath "${2:?usage: hostile_hub_register_test.sh path/to/herd path/to/hub_register_tool}")
source "$(dirname "$0")/hub_lib.sh"
hub_lib_init

status_of() { curl -s -o "$dir/body" -w '%{http_code}' "$@"; }
up() { [ "$(status_of "$1/health")" = 200 ] || fail "the hub at $1 is down after $2"; }
rss_kb() { ps -o rss= -p "$1" | tr -d ' '; }

# ---- a hub on its own: no private pods ----
log=$dir/strict.log
"$herd" hub --port 0 --heartbeat 1 --pod-timeout 3 2>"$log" &
strict_pid=$!
strict=
for _ in $(seq 200); do
  strict=$(grep -o "http://[0-9.]*:[0-9]*" "$log" | tail -1 || true)
  [ -n "$strict" ] && break
  sleep 0.05
done
[ -n "$strict" ] || fail "the strict hub did not say where it listens"

out=$("$tool" post "$strict" "http://127.0.0.1:99999999999" "$dir/id-port")
[ "${out%% *}" = 400 ] || fail "port 99999999999: $out"
grep -q "port '99999999999' is not in 1..65535" <<<"$out" || fail "the 400 does not name the port: $out"
sleep 1.5  # a heartbeat: the prober would have thrown here
up "$strict" "a registration with port 99999999999"
echo "ok port 99999999999 refused (400) naming it; the hub is up a heartbeat later"

n=0
for url in "http://127.0.0.1:8080" "http://localhost:8080" "http://10.0.0.5:8080" \
  "http://169.254.169.254" "http://192.168.1.1:80" "http://100.64.0.1:80" "http://0.0.0.0:80" \
  "http://[::1]:8080" "http://[::ffff:127.0.0.1]:80" "http://[fe80::1]:80" "http://2130706433:80"; do
  n=$((n + 1))
  out=$("$tool" post "$strict" "$url" "$dir/id-private-$n")
  [ "${out%% *}" = 403 ] || fail "$url: $out"
  grep -q "not a public address" <<<"$out" || fail "$url: the 403 does not say why: $out"
done
up "$strict" "registrations at private addresses"
[ "$(status_of "$strict/api/network")" = 200 ] && grep -q '"pods":\[\]' "$dir/body" ||
  fail "a private pod was listed: $(cat "$dir/body")"
echo "ok $n pods at loopback, private, link-local and mapped addresses refused (403)"

flood=($("$tool" flood "$strict" "http://127.0.0.1:1" 500 64))
# "STATUS COUNT" pairs: the default limit (30 new pods a minute an address, less the ones
# above) answers 403 (private), then 429 for the rest.
declare -A count=()
for ((i = 0; i + 1 < ${#flood[@]}; i += 2)); do count[${flood[i]}]=${flood[i + 1]}; done
[ "${count[200]:-0}" = 0 ] || fail "flood: pods accepted: ${flood[*]}"
[ "${count[429]:-0}" -ge 400 ] || fail "flood: too few refused as too many: ${flood[*]}"
up "$strict" "a flood of 500 x 64"
echo "ok a flood of 500 identities x 64 models: ${count[429]} refused as too many (429)"

# ---- a hub for pods on loopback ----
hub_start open --heartbeat 1 --pod-timeout 2 --new-pods-per-minute 0
open=$hub_url open_pid=$hub_pid

out=$("$tool" replay "$open" "http://127.0.0.1:1" "$dir/id-replay")
[ "$out" = "200 403" ] || fail "a replayed registration: $out"
old=$(($(date +%s) * 1000 - 60000))
out=$("$tool" post "$open" "http://127.0.0.1:1" "$dir/id-replay" "$old")
[ "${out%% *}" = 403 ] || fail "an older registration: $out"
echo "ok a replayed registration refused (403), and one older than the last"

"$tool" post "$open" "http://127.0.0.1:1" "$dir/id-two" | grep -q "^200 " || fail "first URL"
out=$("$tool" post "$open" "http://127.0.0.1:2" "$dir/id-two")
[ "${out%% *}" = 409 ] || fail "one identity at two URLs: $out"
grep -q "live at http://127.0.0.1:1" <<<"$out" && grep -q "register http://127.0.0.1:2" <<<"$out" ||
  fail "the 409 does not name both URLs: $out"
echo "ok one identity at a second URL refused (409) naming both"

# Round trips: the hub itself answers a herd /health; a plain server does not; a closed
# port does not either. The view must not tell the last two apart.
"$tool" plain "$dir/plain.port" &
for _ in $(seq 100); do [ -s "$dir/plain.port" ] && break; sleep 0.05; done
plain=http://127.0.0.1:$(cat "$dir/plain.port")
closed=http://127.0.0.1:9  # discard: nothing listens on loopback here
for _ in 1 2 3; do
  for target in "$open" "$plain" "$closed"; do
    "$tool" post "$open" "$target" "$dir/id-rtt-${target##*:}" >/dev/null
  done
  sleep 1
done
status_of "$open/api/network" >/dev/null
rtt() { grep -o "\"rtt_ms\":[^,]*,[^{}]*\"url\":\"$1\"" "$dir/body" | grep -o '"rtt_ms":[^,]*'; }
[[ "$(rtt "$open")" =~ ^\"rtt_ms\":[0-9] ]] || fail "no round trip to a herd /health: $(rtt "$open")"
[ "$(rtt "$plain")" = '"rtt_ms":null' ] || fail "a port that is not herd's: $(rtt "$plain")"
[ "$(rtt "$closed")" = '"rtt_ms":null' ] || fail "a closed port: $(rtt "$closed")"
echo "ok round trips only to a herd /health: an open port and a closed one look the same"

# Floods, again and again: each round's pods expire and leave nothing behind.
pods_now() {
  [ "$(status_of "$open/health")" = 200 ] || fail "the hub is down: $(cat "$dir/body")"
  grep -o '"pods":[0-9]*' "$dir/body" | cut -d: -f2
}
for round in 1 2 3; do
  "$tool" flood "$open" "http://127.0.0.1:1" 500 64 >"$dir/flood.txt"
  grep -q "^200 500$" "$dir/flood.txt" || fail "flood round $round: $(cat "$dir/flood.txt")"
  peak=$(rss_kb "$open_pid") live=$(pods_now)
  [ "$live" -gt 0 ] || fail "flood round $round: no pod live at its end"
  for _ in $(seq 100); do [ "$(pods_now)" = 0 ] && break; sleep 0.1; done
  [ "$(pods_now)" = 0 ] || fail "flood round $round: pods not expired: $(cat "$dir/body")"
  rss=$(rss_kb "$open_pid")
  [ "$round" = 1 ] && first=$rss
  echo "  round $round: $live pods live at its end, RSS $peak KiB; all expired, RSS $rss KiB"
done
# Without sanitizers memory freed is reused: later rounds stay where the first left it.
# ASan holds freed memory in quarantine (up to 256 MiB) before reusing it.
limit=$((32 * 1024))
[[ "${ASAN_OPTIONS:-}" == *log_path* ]] && limit=$((320 * 1024))
[ $((rss - first)) -le $limit ] ||
  fail "the hub grew by $((rss - first)) KiB over 2 more floods (at most $limit)"
up "$open" "three floods"
echo "ok three floods of 500 identities x 64 models: RSS $first KiB after the first, $rss KiB after the last"
echo PASS
