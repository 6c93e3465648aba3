# Sourced by the hub's end-to-end tests (and bench/check_thresholds.sh): a scratch folder,
# every process started killed at exit, and starting hubs and pods the way users do.
#   herd=/path/to/herd; source tests/hub_lib.sh
#   hub_lib_init                  $dir, $pids, the exit trap (kills the jobs left, runs $on_exit)
#   synth_model OUT [ARGS...]     a small synthetic model (qwen3, 128 wide, 2 layers, q4_0)
#   hub_start LOG [ARGS...]       `herd hub --port 0 --allow-private-pods ARGS` (its pods are on
#                                 loopback) logging to $dir/LOG.log: $hub_pid,
#                                 and $hub_url once it listens (http:// or https://)
#   pod_start NAME MODEL [ARGS...]  `herd serve --model MODEL --port 0 ARGS` with its own
#                                 identity, logging to $dir/NAME.log
#   wait_registered NAME URL      until pod NAME registered with the hub at URL
#   fail MESSAGE                  prints it and the tail of every log, exits 1

hub_lib_init() {
  dir=$(mktemp -d)
  pids=()
  export XDG_CONFIG_HOME=$dir/config XDG_DATA_HOME=$dir/data
  trap hub_lib_cleanup EXIT
}

# Only the jobs not yet reaped are signalled (jobs -p), so a recycled process id is never hit
# (a test may have waited for one of $pids already).
hub_lib_cleanup() {
  local p
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${on_exit:-}" ]; then $on_exit; fi
  rm -rf "$dir"
}

fail() {
  echo "FAIL: $*" >&2
  local log
  for log in "$dir"/*.log; do
    [ -f "$log" ] || continue
    echo "--- $log" >&2
    tail -20 "$log" >&2
  done
  exit 1
}

synth_model() {
  local out=$1
  shift
  [ $# -gt 0 ] || set -- --embd 128 --layers 2 --heads 4 --kv-heads 2
  "$herd" synth --arch qwen3 --type q4_0 "$@" --out "$out" >/dev/null 2>&1 || fail "synth $out"
}

hub_start() {
  local log=$dir/$1.log
  shift
  "$herd" hub --port 0 --allow-private-pods "$@" 2>>"$log" &
  hub_pid=$!
  pids+=("$hub_pid")
  hub_url=
  for _ in $(seq 200); do
    hub_url=$(grep -o "https\?://[0-9.]*:[0-9]*" "$log" | tail -1 || true)
    [ -n "$hub_url" ] && return 0
    sleep 0.05
  done
  fail "the hub ($log) did not say where it listens"
}

pod_start() {
  local name=$1 model=$2
  shift 2
  XDG_CONFIG_HOME=$dir/config-$name "$herd" serve --model "$model" --host 127.0.0.1 --port 0 \
    "$@" 2>"$dir/$name.log" &
  pids+=($!)
}

wait_registered() {
  for _ in $(seq 600); do
    grep -q "registered with the hub at $2 " "$dir/$1.log" && return 0
    sleep 0.05
  done
  fail "pod $1 did not register with the hub at $2"
}
