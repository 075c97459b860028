#!/usr/bin/env bash
# Builds omgs and runs the whole test suite through CTest (MPI tests under mpiexec).
#
#   ./scripts/test.sh                                   plain RelWithDebInfo build in build/
#   ./scripts/test.sh --sanitize address,undefined      ASan+UBSan build in build-asan/
#   ./scripts/test.sh --sanitize thread -L threads      TSan build in build-tsan/ (threaded tests)
#   ./scripts/test.sh --mpi mpich --shared              MPICH, shared libomgs, in build-mpich-shared/
#
# Options come first; anything after them goes to ctest. Missing Debian/Ubuntu packages
# are installed with apt when run as root (otherwise the apt command is printed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

sanitize=""
mpi=""
shared=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize)
      sanitize="${2:?--sanitize needs a list, e.g. address,undefined}"
      shift 2
      ;;
    --mpi)
      mpi="${2:?--mpi needs openmpi or mpich}"
      shift 2
      ;;
    --shared)
      shared=1
      shift
      ;;
    *) break ;;
  esac
done

omgs_ensure_packages
args=(-DOMGS_ENABLE_TESTS=ON)
suffix=""
case "$mpi" in
  "" | openmpi) ;;
  mpich)
    omgs_ensure_apt_packages libmpich-dev mpich
    # Both MPIs can be installed side by side: name MPICH's wrappers and launcher.
    args+=("-DMPI_C_COMPILER=$(command -v mpicc.mpich)" "-DMPI_CXX_COMPILER=$(command -v mpicxx.mpich)"
      "-DMPIEXEC_EXECUTABLE=$(command -v mpiexec.mpich)")
    suffix="$suffix-mpich"
    ;;
  *)
    omgs_log "--mpi: '$mpi' is not openmpi or mpich"
    exit 2
    ;;
esac
if [ "$shared" -eq 1 ]; then
  args+=(-DBUILD_SHARED_LIBS=ON)
  suffix="$suffix-shared"
fi

cd "$OMGS_ROOT"
if [ -z "$sanitize" ]; then
  dir="$OMGS_ROOT/build$suffix"
  omgs_build "$dir" "${args[@]}" -DOMGS_ENABLE_BENCHMARKS=ON -DOMGS_ENABLE_WARNINGS_AS_ERRORS=ON
else
  case "$sanitize" in
    thread) dir="$OMGS_ROOT/build-tsan$suffix" ;;
    *) dir="$OMGS_ROOT/build-asan$suffix" ;;
  esac
  # libtorch is not built with the sanitizers: its example runs in the plain builds only.
  # -O1 (with asserts and -g), as the sanitizers' documentation advises: at -O0 the
  # un-inlined Kokkos kernels and planner sweeps dominate the suites' time under CI's limit.
  omgs_configure "$dir" "${args[@]}" -DOMGS_SANITIZE="$sanitize" -DOMGS_ENABLE_BENCHMARKS=OFF \
    -DOMGS_ENABLE_TORCH_EXAMPLE=OFF -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" "-DCMAKE_C_FLAGS_DEBUG=-g -O1"
  # With a selection of tests (e.g. -L threads) only the programs they run are built: a
  # sanitizer's compile of the other test programs is most of its build's time.
  if [ $# -gt 0 ]; then
    mapfile -t targets < <(python3 "$OMGS_ROOT/scripts/tested_targets.py" "$dir" "$@")
    omgs_log "building the ${#targets[@]} programs the selected tests run, $(omgs_jobs) jobs"
    cmake --build "$dir" -j "$(omgs_jobs)" --target "${targets[@]}"
  else
    omgs_log "building with $(omgs_jobs) jobs"
    cmake --build "$dir" -j "$(omgs_jobs)"
  fi
  # Open MPI's own allocations are reported as leaks at exit; they are not omgs'.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  # tests/tsan.supp names the reports inside Open MPI that are suppressed, and why. They match
  # on a stack's modules: history_size=7 keeps old stacks restorable ("failed to restore the
  # stack" left a libopen-pal write unmatched, so a suppressed kind of report got through).
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0:history_size=7:suppressions=$OMGS_ROOT/tests/tsan.supp}"
fi
cd "$dir"
ctest --output-on-failure -j "$(omgs_jobs)" "$@"
