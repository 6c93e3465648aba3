# Shared by the end-to-end tests that start `herd node` processes (sourced, after $herd and
# $dir are set): cleanup at exit, failure with the logs, nodes on 127.0.0.1.
#   start_node NAME [node options...]  -> `herd node` on port 0 in the background, its log
#                                         $dir/NAME.log, its pid in pid_of[NAME]
#   wait_nodes NAME...                 -> until each has logged its address, in addr[NAME]
#                                         (and its advert, when node_ready_pattern is set)
#   mark NAME / since NAME MARK        -> lines of its log so far / the log after them
#   fail MESSAGE                       -> prints the last lines of every log, exits 1
# A test may define cleanup_more (run at exit before $dir goes) and set log_lines.

# Every process the test starts is a background job of this shell: cleanup signals only the
# jobs not yet reaped (jobs -p), so that a recycled process id is never hit. Stopped ones
# are continued first, so that SIGKILL finds them.
cleanup() {
  local pid live
  live=$(jobs -p)
  for pid in $live; do kill -CONT "$pid" 2>/dev/null || true; done
  for pid in $live; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in $live; do wait "$pid" 2>/dev/null || true; done
  if declare -F cleanup_more >/dev/null; then cleanup_more; fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*"
  for log in "${serve_log:-}" "$dir"/*.log; do
    [ -n "$log" ] && [ -e "$log" ] && { echo "--- $(basename "$log")"; tail -"${log_lines:-15}" "$log"; }
  done
  exit 1
}

declare -A addr pid_of
start_node() {
  local name=$1
  shift
  "$herd" node --listen 127.0.0.1:0 --threads 1 --name "$name" "$@" 2>"$dir/$name.log" &
  pid_of[$name]=$!
}
wait_nodes() {
  local name line
  for name in "$@"; do
    for _ in $(seq 600); do
      line=$(grep -o "listening on 127\.0\.0\.1:[0-9]*" "$dir/$name.log" || true)
      if [ -n "$line" ] &&
        { [ -z "${node_ready_pattern:-}" ] || grep -q "$node_ready_pattern" "$dir/$name.log"; }; then
        break
      fi
      line=""
      kill -0 "${pid_of[$name]}" 2>/dev/null || fail "node $name exited at start"
      sleep 0.05
    done
    [ -n "$line" ] || fail "node $name did not log its address"
    addr[$name]=${line#listening on }
  done
}
mark() { wc -l <"$dir/$1.log"; }
since() { tail -n +"$(($2 + 1))" "$dir/$1.log"; }
