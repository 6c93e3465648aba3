#!/usr/bin/env bash
# Runs one Node.js end-to-end test of herd serve (tests/node/NAME_test.mjs) against a fresh
# server on a small synthetic model: openai, ollama, responses, anthropic (the official
# clients on OpenAI's chat, Ollama's, the Responses and the Messages API), page (headless
# Chromium on the web page), load (32 concurrent streaming clients).
set -euo pipefail
herd=${1:?usage: serve_node_test.sh path/to/herd NAME}
name=${2:?usage: serve_node_test.sh path/to/herd NAME}
herd=$(realpath "$herd")
here=$(cd "$(dirname "$0")" && pwd)
modules=$here/node/node_modules
for package in openai ollama @anthropic-ai/sdk playwright-core; do
  [ -d "$modules/$package" ] ||
    { echo "FAIL: tests/node/node_modules has no $package: run scripts/install-deps"; exit 1; }
done
dir=$(mktemp -d)
source "$here/serve_lib.sh"
trap 'serve_cleanup; rm -rf "$dir"' EXIT
# The page test watches a reply grow and stops one: a model slow enough to see that.
case $name in
  page) serve_model "$dir" 1024 4 ;;
  load) serve_model "$dir" 1024 4 ;;  # slow enough that latencies are the server's
  *) serve_model "$dir" ;;
esac
case $name in
  openai | ollama | responses | anthropic) serve_start --api-key test-key --slots 4 ;;
  page) serve_start --slots 2 ;;
  load) serve_start --slots 8 --queue 64 ;;
  *) fail "unknown test $name" ;;
esac
HERD_URL=$url HERD_BIN=$herd HERD_MODEL=$model node "$here/node/${name}_test.mjs" || fail "${name}_test.mjs"
serve_stop
