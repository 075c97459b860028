#!/usr/bin/env bash
# The device check on a bare GPU machine (docs/portability.md, "A bare GPU machine: the
# device kit"): unpacks the device kit (scripts/device-kit.sh) into a private prefix, uses
# the machine's own MPI where it compiles and runs a program (else the kit's), then runs
# scripts/gpu-check.sh against KOKKOS_ROOT within a time budget and copies the report and
# the measured top-k constants (gpu-topk-measured.json) to $OUT.
#
#   ./scripts/device-check.sh [--dry-run] KOKKOS_ROOT
#   ./scripts/device-check.sh --unpack-only       # unpack, print the environment, stop
#
# Environment:
#   OMGS_KIT         the kit (default .devkit in the checkout)
#   OMGS_KIT_PREFIX  where it is unpacked (default /tmp/omgs-kit)
#   OMGS_KIT_MPI     auto (default) | kit | system: whose MPI builds and runs the checks
#   OUT              where the report, the JSON and the logs' tails go (default the build dir)
#   OMGS_CHECK_*     as in scripts/gpu-check.sh; the defaults here: a 420 s budget, the
#                    select tests and the runtime's on 1 and 2 ranks, n up to 1e8 on a device
# Exit status: that of gpu-check.sh; 2 on a usage error or a missing kit.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/common.sh
source "$here/common.sh"
# shellcheck source=scripts/devkit_env.sh
source "$here/devkit_env.sh"
usage() {
  sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

dry=0
unpack_only=0
kokkos_root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --unpack-only) unpack_only=1 ;;
    -h | --help) usage 0 ;;
    -*) omgs_log "unknown option '$1'"; usage ;;
    *) [ -z "$kokkos_root" ] || usage; kokkos_root="$1" ;;
  esac
  shift
done
if [ "$unpack_only" -eq 0 ]; then
  [ -n "$kokkos_root" ] || usage
  [ -d "$kokkos_root" ] || { omgs_log "KOKKOS_ROOT '$kokkos_root' is not a directory"; exit 2; }
fi
kit="${OMGS_KIT:-$OMGS_ROOT/.devkit}"
prefix="${OMGS_KIT_PREFIX:-/tmp/omgs-kit}"
[ -d "$kit/debs" ] || { omgs_log "no device kit at $kit (make it with scripts/device-kit.sh)"; exit 2; }

case "${OMGS_KIT_MPI:-auto}" in
  kit) with_mpi=1 ;;
  system) with_mpi=0 ;;
  auto) if omgs_kit_system_mpi_ok; then with_mpi=0; else with_mpi=1; fi ;;
  *) omgs_log "OMGS_KIT_MPI must be auto, kit or system"; exit 2 ;;
esac
mpi_words=("the machine's own MPI ($(command -v mpiexec))" "the kit's Open MPI")

# The device defaults: what matters on a GPU (select on the device, the runtime on 1 and 2
# ranks, the benchmark, the main job) inside one 10-minute command with the Kokkos build.
export OMGS_CHECK_CTEST="${OMGS_CHECK_CTEST--L ^(select|runtime)$ -LE ^(faults|soak)$ -E \.np4$}"
export OMGS_CHECK_TARGETS="${OMGS_CHECK_TARGETS:-selected}"
export OMGS_CHECK_BUDGET_S="${OMGS_CHECK_BUDGET_S:-420}"
export OMGS_CHECK_STEP_BUDGETS="${OMGS_CHECK_STEP_BUDGETS-configure=60 build=240 ctest=150 bench-topk=60 main-job-1=45 main-job-2=45}"
export OMGS_CHECK_ITERS="${OMGS_CHECK_ITERS:-10}"
command -v ninja >/dev/null 2>&1 && export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"

if [ "$dry" -eq 1 ]; then
  echo "kit: $kit ($(ls "$kit"/debs/*.deb 2>/dev/null | wc -l) packages), unpacked into $prefix"
  echo "MPI: ${mpi_words[$with_mpi]}"
  echo "then: scripts/gpu-check.sh $kokkos_root with"
  env | grep -E '^(OMGS_CHECK_|CMAKE_GENERATOR)' | sort | sed 's/^/  /'
  exit 0
fi

omgs_kit_unpack "$kit" "$prefix" "$with_mpi" || exit 2
omgs_kit_env "$prefix" "$with_mpi"
omgs_log "MPI: ${mpi_words[$with_mpi]}: $(mpiexec --version 2>&1 | head -n 1)"
if [ "$unpack_only" -eq 1 ]; then
  env | grep -E '^(PATH|LD_LIBRARY_PATH|PKG_CONFIG_PATH|CMAKE_PREFIX_PATH|CPATH|OPAL_PREFIX|PMIX_PREFIX|PMIX_MCA_mca_base_component_path|MPI_HOME)=' | sort
  exit 0
fi

backend=host
grep -qs -E 'Kokkos_DEVICES "?[^)]*(CUDA|HIP)' "$kokkos_root"/lib*/cmake/Kokkos/KokkosConfigCommon.cmake &&
  backend=device
[ "$backend" = device ] && export OMGS_CHECK_BENCH_ARGS="${OMGS_CHECK_BENCH_ARGS:---reps 5 --large}"
export OMGS_CHECK_DIR="${OMGS_CHECK_DIR:-$OMGS_ROOT/build-device-check}"
start=$SECONDS
"$here/gpu-check.sh" "$kokkos_root"
rc=$?
omgs_log "device check: exit $rc after $((SECONDS - start)) s"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  d="$OMGS_CHECK_DIR"
  cp "$d/gpu-check-report.md" "$OUT/" 2>/dev/null
  cp "$d/gpu-topk-measured.json" "$OUT/" 2>/dev/null
  # The logs' tails in one file: the device tool brings back at most 8 files.
  for f in "$d"/check-*.log; do
    [ -e "$f" ] && { echo "==> $(basename "$f")"; tail -n 60 "$f"; }
  done >"$OUT/device-check-logs.txt"
fi
exit "$rc"
