# What an end-to-end test does when something it needs is missing (sourced; bash).
# Outside CI a missing dependency skips the test (exit 77, ctest's SKIP_RETURN_CODE, with
# "SKIP: <reason>"); under CI (CI=true, as GitHub Actions and .ci/run set it) it fails the
# test ("FAIL: missing dependency: <reason>"), so that CI cannot go green with a test that
# never ran. scripts/install-deps installs every dependency these name.
#   missing_dependency REASON   -> exits 77, or 1 under CI
#   require_tools TOOL...       -> missing_dependency for the first one not on the PATH
#   require_root WHY            -> missing_dependency unless running as root
#   require_linux WHAT          -> on another system the test does not apply (Linux's
#                                  network namespaces): a skip, under CI too
# tests/missing_dependency.sh runs missing_dependency for tests CMake could not register.

under_ci() {
  case "${CI:-}" in
    [Tt][Rr][Uu][Ee] | 1 | [Yy][Ee][Ss]) return 0 ;;
    *) return 1 ;;
  esac
}

missing_dependency() {
  if under_ci; then
    echo "FAIL: missing dependency: $1 (CI=$CI: a missing dependency fails, it does not skip)"
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}

require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || missing_dependency "$tool not found (scripts/install-deps)"
  done
}

require_root() {
  [ "$(id -u)" -eq 0 ] || missing_dependency "needs root for $1"
}

require_linux() {
  [ "$(uname -s)" = Linux ] || { echo "SKIP: $1 exists on Linux only"; exit 77; }
}
