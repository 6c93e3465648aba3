#!/usr/bin/env bash
# Stands in for a test that CMake could not register because a dependency is missing
# (tests/CMakeLists.txt, herd_missing_test): a skip naming it, or under CI a failure
# (tests/requires.sh).
# Usage: missing_dependency.sh REASON
set -euo pipefail
source "$(dirname "$0")/requires.sh"
missing_dependency "${1:?usage: missing_dependency.sh REASON}"
