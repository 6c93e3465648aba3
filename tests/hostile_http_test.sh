#!/usr/bin/env bash
# Hostile clients against the HTTP request path of one `herd serve` and one `herd hub` (with
# that serve registered as its pod), started once: deep JSON to serve's /api/verify and
# /v1 endpoints and through the hub, 200 MB chunked bodies, a 200 MB Content-Length, a gzip
# bomb, chunked bodies to paths without a handler, and connections trickling their headers
# (64 to serve, 48 to the hub: more than its 32 from one address) while /health must answer
# within 2 s. After each: both processes up, /health answering, and RSS within start + 64 MiB
# (the largest body either takes is 8 MiB; 64 MiB leaves room for a few in flight, allocator
# slack and thread stacks, while one 200 MB body read whole would pass it three times over).
# The attacks are tests/hostile_http.py (raw sockets).
set -euo pipefail
herd=$(realpath "${1:?usage: hostile_http_test.sh path/to/herd}")
source "$(dirname "$0")/hub_lib.sh"
# Under tests/run_sanitized.sh (ASan): a small quarantine of freed memory (256 MiB by
# default, which would count as RSS) and room for ASan's own bookkeeping.
rss_slack_mib=64
if [ -n "${ASAN_OPTIONS:-}" ]; then
  export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=8"
  rss_slack_mib=128
fi
hub_lib_init
command -v python3 >/dev/null || fail "no python3: run scripts/install-deps"

synth_model "$dir/m.gguf"
hub_start hub --api-key k1 --heartbeat 1 --header-timeout 3
pod_start pod "$dir/m.gguf" --alias hostile --threads 1 --hub "$hub_url" --header-timeout 3
wait_registered pod "$hub_url"
serve_url=$(grep -o "http://127.0.0.1:[0-9]*" "$dir/pod.log" | head -1)
[ -n "$serve_url" ] || fail "the pod did not say where it listens"
serve_pid=${pids[1]}
for _ in $(seq 200); do
  curl -sf "$serve_url/health" | grep -q '"ready"' && break
  sleep 0.05
done

python3 "$(dirname "$0")/hostile_http.py" "$serve_url" "$serve_pid" "$hub_url" "$hub_pid" k1 \
  hostile "$rss_slack_mib" || fail "an attack got through"

# Nothing crashed or was aborted on the way: both logs free of it.
! grep -Ei "terminate called|Segmentation|AddressSanitizer|runtime error" "$dir"/*.log ||
  fail "a server reported a crash"
echo PASS
