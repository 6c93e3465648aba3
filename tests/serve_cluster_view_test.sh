#!/usr/bin/env bash
# The page's live view of a pod: three `herd node`s on 127.0.0.1 and `herd serve --peers
# ... --no-local --parallel pipeline:3` over them (plain "pipeline" may leave a node out);
# tests/node/cluster_page_test.mjs (headless Chromium) checks the nodes, the 3-stage plan
# and GET /api/cluster, then kills one node with SIGKILL during a streaming reply and waits
# for the page to show it lost (or the pod not ok). About 40 s.
set -euo pipefail
herd=${1:?usage: serve_cluster_view_test.sh path/to/herd}
herd=$(realpath "$herd")
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node/node_modules/playwright-core" ] ||
  { echo "FAIL: tests/node has no node_modules: run scripts/install-deps"; exit 1; }
dir=$(mktemp -d)
export XDG_CACHE_HOME=$dir/cache  # the coordinator's file hashes; never the user's cache
export XDG_CONFIG_HOME=$dir/config  # node identities (made on first use); never the user's
unset HERD_KEY
source "$here/serve_lib.sh"
source "$here/node_lib.sh"
cleanup_more() { rm -f "${serve_log:-}"; }

# Nodes listen on port 0 and log their address. --bandwidth: probes of nodes that share a
# machine slow each other (docs/cluster.md); the same figure gives every node a stage.
for name in n1 n2 n3; do start_node "$name" --bandwidth 10; done
wait_nodes n1 n2 n3

# Six layers, two per stage; wide enough that a long reply takes seconds.
serve_model "$dir" 1024 6
serve_start --slots 2 --peers "${addr[n1]},${addr[n2]},${addr[n3]}" --no-local \
  --parallel pipeline:3
HERD_URL=$url HERD_NODES="n1,n2,n3" HERD_VICTIM=n2 HERD_VICTIM_PID=${pid_of[n2]} \
  node "$here/node/cluster_page_test.mjs" || fail "cluster_page_test.mjs"
# The server outlives the node it lost and still stops cleanly.
curl -sf "$url/api/cluster" >/dev/null || fail "/api/cluster after the kill"
serve_stop
