#!/usr/bin/env bash
# Runs an end-to-end test of a HERD_SANITIZE build so that a sanitizer report from any herd
# process it starts fails it. Every report goes to a file (log_path) instead of stderr, where
# neither `2>/dev/null`, nor a test that expects herd to fail, nor a node the test kills at
# the end can lose it. Prints the reports and exits 1 if there are any, else exits with the
# test's own code. Options already in ASAN_OPTIONS / UBSAN_OPTIONS are kept
# (scripts/test-libcxx sets them).
# Usage: run_sanitized.sh COMMAND [ARGS...]
set -uo pipefail
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
# Both: in one ASan + UBSan runtime the common flags of UBSAN_OPTIONS override ASAN_OPTIONS.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$reports/report"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$reports/report"
code=0
"$@" || code=$?
shopt -s nullglob
files=("$reports"/report.*)
if [ ${#files[@]} -gt 0 ]; then
  for f in "${files[@]}"; do
    echo "--- sanitizer report of process ${f##*.}"
    cat "$f"
  done
  echo "FAIL: ${#files[@]} herd process(es) of this test reported sanitizer errors (test exit code $code)"
  exit 1
fi
exit "$code"
