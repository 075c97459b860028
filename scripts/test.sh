#!/usr/bin/env bash
# Builds omgs and runs the whole test suite through CTest (MPI tests under mpiexec).
#
#   ./scripts/test.sh                       plain RelWithDebInfo build in build/
#   ./scripts/test.sh --sanitize address,undefined [ctest args]   ASan+UBSan build in build-asan/
#   ./scripts/test.sh --sanitize thread -L threads                  TSan build in build-tsan/
#
# Missing Debian/Ubuntu packages are installed with apt when run as root (otherwise the
# apt command is printed). Extra arguments go to ctest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

sanitize=""
if [ "${1:-}" = "--sanitize" ]; then
  sanitize="${2:?--sanitize needs a list, e.g. address,undefined}"
  shift 2
fi

omgs_ensure_packages
cd "$OMGS_ROOT"
if [ -z "$sanitize" ]; then
  dir="$OMGS_ROOT/build"
  omgs_build "$dir" -DOMGS_ENABLE_TESTS=ON -DOMGS_ENABLE_BENCHMARKS=ON -DOMGS_ENABLE_WARNINGS_AS_ERRORS=ON
else
  case "$sanitize" in
    thread) dir="$OMGS_ROOT/build-tsan" ;;
    *) dir="$OMGS_ROOT/build-asan" ;;
  esac
  omgs_build "$dir" -DOMGS_SANITIZE="$sanitize" -DOMGS_ENABLE_TESTS=ON -DOMGS_ENABLE_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug
  # Open MPI's own allocations are reported as leaks at exit; they are not omgs'.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
fi
cd "$dir"
ctest --output-on-failure -j "$(omgs_jobs)" "$@"
