#!/usr/bin/env bash
# End-to-end test of `herd devices`: the CPU line, every Vulkan device (lavapipe where
# scripts/install-deps ran), --json, and --device's errors. Without a Vulkan device the
# checks that need one skip, or under CI=true fail (tests/requires.sh).
# Usage: tests/devices_cli_test.sh path/to/herd
set -euo pipefail
source "$(dirname "$0")/requires.sh"

herd=${1:?usage: $0 path/to/herd}
failures=0
fail() { failures=$((failures + 1)); printf 'FAIL %s\n' "$*"; }

out=$("$herd" devices) || fail "herd devices exited $?"
[[ "$out" == cpu* ]] || fail "herd devices: no cpu line first: $out"

json=$("$herd" devices --json) || fail "herd devices --json exited $?"
kinds=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(x["kind"] for x in d["devices"]))' <<< "$json") \
  || fail "herd devices --json: not JSON: $json"
[[ "$kinds" == cpu* ]] || fail "herd devices --json: kinds '$kinds'"

if err=$("$herd" devices --device cuda 2>&1); then fail "--device cuda succeeded"; fi
[[ "$err" == *"expected auto, cpu, vulkan or vulkan:N"* ]] || fail "--device cuda said: $err"
if err=$("$herd" devices --device vulkan:99 2>&1); then fail "--device vulkan:99 succeeded"; fi
[[ "$err" == *"herd: error: [vulkan]"* ]] || fail "--device vulkan:99 said: $err"
cpu_only=$("$herd" devices --device cpu) || fail "--device cpu exited $?"
[[ "$cpu_only" != *vulkan:* ]] || fail "--device cpu listed a Vulkan device: $cpu_only"

if [[ "$kinds" != *vulkan* ]]; then
  # Built without Vulkan, or no device: --device vulkan must say why, clearly.
  err=$("$herd" devices --device vulkan 2>&1) && fail "--device vulkan succeeded without a device"
  [[ "$err" == *"herd: error: [vulkan]"* ]] || fail "--device vulkan said: $err"
  if [[ $failures -ne 0 ]]; then exit 1; fi
  missing_dependency "no Vulkan device: $err"
fi
one=$("$herd" devices --device vulkan:0) || fail "--device vulkan:0 exited $?"
[[ "$one" == vulkan:0* && "$one" == *subgroups* && "$one" == *heap\ 0* ]] ||
  fail "--device vulkan:0 printed: $one"
[[ "$one" != cpu* ]] || fail "--device vulkan:0 printed the CPU"
measured=$("$herd" devices --device vulkan:0 --bandwidth) || fail "--bandwidth exited $?"
[[ "$measured" == *"GB/s copy"* ]] || fail "--bandwidth printed: $measured"

if [[ $failures -ne 0 ]]; then exit 1; fi
echo "devices_cli_test: ok"
