# Shared by the herd serve end-to-end tests (sourced): a small synthetic model and a server
# on a free port of 127.0.0.1, stopped (by its pid) when the test exits.
#   serve_model DIR [EMBD LAYERS] -> $model, a small qwen3 q4_0 with herd's ChatML vocabulary
#   serve_start ARGS...        -> $url, $serve_pid, $serve_log (waits until /health is ready)
#   serve_stop                 -> SIGTERM, waits, checks the exit code is 0
fail() { echo "FAIL: $*"; [ -n "${serve_log:-}" ] && tail -20 "$serve_log"; exit 1; }

serve_model() {
  model=$1/serve-e2e.gguf
  "$herd" synth --arch qwen3 --embd "${2:-256}" --layers "${3:-2}" --heads 4 --kv-heads 2 --type q4_0 \
    --out "$model" >/dev/null 2>&1 || fail "synth"
}

serve_start() {
  serve_log=$(mktemp)
  "$herd" serve --model "$model" --host 127.0.0.1 --port 0 --threads 2 "$@" 2>"$serve_log" &
  serve_pid=$!
  local port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's|^serve: listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$serve_log")
    [ -n "$port" ] && grep -q "^serve: ready" "$serve_log" && break
    kill -0 "$serve_pid" 2>/dev/null || fail "herd serve exited: $(cat "$serve_log")"
    sleep 0.05
  done
  [ -n "$port" ] || fail "herd serve did not start"
  url=http://127.0.0.1:$port
  curl -sf "$url/health" | grep -q '"ready"' || fail "/health is not ready"
}

serve_stop() {
  kill -TERM "$serve_pid"
  local code=0
  wait "$serve_pid" || code=$?
  serve_pid=""
  [ "$code" -eq 0 ] || fail "herd serve exited $code after SIGTERM"
}

serve_cleanup() {
  if [ -n "${serve_pid:-}" ]; then kill "$serve_pid" 2>/dev/null || true; fi
  rm -f "${serve_log:-}"
}
