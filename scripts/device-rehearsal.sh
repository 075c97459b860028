#!/usr/bin/env bash
# The device check rehearsed here (docs/portability.md, "A bare GPU machine: the device
# kit"): scripts/device-check.sh in a private mount namespace where every package of the kit
# that this machine has installed (Open MPI and its libraries, hwloc, Catch2, pkg-config),
# and Debian's Kokkos 3.4, are hidden under whiteouts of an overlay on /usr, so that only the
# kit can supply them. Needs root (unshare -m, overlayfs).
#
#   ./scripts/device-rehearsal.sh [--full] KOKKOS_ROOT
#   ./scripts/device-rehearsal.sh --without-kit KOKKOS_ROOT
#
# KOKKOS_ROOT: a host (Serial / OpenMP) Kokkos 4 built from the kit's tarball (the command is
# in docs/portability.md). --full: the whole suite and every target, with no time budget,
# instead of the device's selection and budgets. --without-kit: checks that the packages are
# hidden (no mpicc, no pkg-config, no Catch2) and that configuring omgs then fails.
# OUT (default build-device-rehearsal/out) receives what the device run would bring back.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
log() { printf '[rehearsal] %s\n' "$*" >&2; }
usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

mode=kit
full=0
kokkos_root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --full) full=1 ;;
    --without-kit) mode=none ;;
    -h | --help) usage 0 ;;
    -*) log "unknown option '$1'"; usage ;;
    *) [ -z "$kokkos_root" ] || usage; kokkos_root="$1" ;;
  esac
  shift
done
[ -n "$kokkos_root" ] || usage
kokkos_root="$(cd "$kokkos_root" 2>/dev/null && pwd)" || { log "KOKKOS_ROOT is not a directory"; exit 2; }
kit="${OMGS_KIT:-$root/.devkit}"
[ -f "$kit/MANIFEST" ] || { log "no device kit at $kit (scripts/device-kit.sh makes it)"; exit 2; }
[ "$(id -u)" -eq 0 ] || { log "needs root (a mount namespace with an overlay on /usr)"; exit 2; }

# What to hide: the kit's packages that are installed here, plus Debian's Kokkos 3.4.
hide=()
for p in $(awk '$1 == "deb" { print $2 }' "$kit/MANIFEST") pkg-config libtrilinos-kokkos-dev \
  libtrilinos-kokkos-kernels-dev libhwloc-plugins mpi-default-dev mpi-default-bin; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" && hide+=("$p")
done
work="$(mktemp -d /tmp/omgs-rehearsal.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/up" "$work/work"
# Whiteouts (character devices 0:0) in the overlay's upper layer hide those paths. /lib and
# /bin are /usr/lib and /usr/bin here (merged /usr).
dpkg -L "${hide[@]}" 2>/dev/null | sed -E 's#^/(lib|bin|sbin)/#/usr/\1/#' | grep '^/usr/' |
  while read -r f; do [ -d "$f" ] || echo "$f"; done | sort -u >"$work/files.txt"
{
  cat "$work/files.txt"
  # Links made by update-alternatives (mpicc, mpiexec, ...) that lead to a hidden file.
  for f in /usr/bin/*; do
    [ -L "$f" ] && readlink -f "$f" | grep -qxF -f "$work/files.txt" && echo "$f"
  done
} | sort -u >"$work/hidden.txt"
while read -r f; do
  mkdir -p "$work/up$(dirname "${f#/usr}")"
  mknod "$work/up${f#/usr}" c 0 0
done <"$work/hidden.txt"
log "hiding $(wc -l <"$work/hidden.txt") files of ${#hide[@]} packages: ${hide[*]}"

export OUT="${OUT:-$root/build-device-rehearsal/out}"
mkdir -p "$OUT"
# A fixed prefix: the build directory's CMake cache names its paths.
export OMGS_KIT="$kit" OMGS_KIT_PREFIX="${OMGS_KIT_PREFIX:-$root/build-device-rehearsal/kit-prefix}" OMGS_KIT_MODE="$mode"
export OMGS_CHECK_DIR="${OMGS_CHECK_DIR:-$root/build-device-rehearsal/build}"
if [ "$full" -eq 1 ]; then
  export OMGS_CHECK_CTEST="${OMGS_CHECK_CTEST:-}" OMGS_CHECK_TARGETS=all OMGS_CHECK_BUDGET_S=0 \
    OMGS_CHECK_STEP_BUDGETS=""
fi
unshare -m --propagation private bash -c '
  set -u
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$1/up,workdir=$1/work" /usr || exit 3
  [ -d /etc/openmpi ] && mount -t tmpfs none /etc/openmpi
  found=""
  for c in mpicc mpiexec pkg-config pkgconf; do command -v "$c" >/dev/null && found+=" $c"; done
  for f in /usr/include/hwloc.h /usr/lib/cmake/Catch2/Catch2Config.cmake \
    /usr/include/catch2/catch.hpp /usr/lib/x86_64-linux-gnu/libmpi.so.40; do
    [ -e "$f" ] && found+=" $f"
  done
  if [ -n "$found" ]; then echo "[rehearsal] NOT hidden:$found" >&2; exit 3; fi
  echo "[rehearsal] hidden: no mpicc, mpiexec, pkg-config, hwloc, Catch2 or libmpi" >&2
  if [ "$OMGS_KIT_MODE" = none ]; then
    cmake -S "$2" -B "$1/without-kit" -DKokkos_ROOT="$3" >"$OUT/without-kit.log" 2>&1
    rc=$?
    grep -m 3 -E "omgs: .* was not found|Could NOT find|not found" "$OUT/without-kit.log" >&2
    if [ "$rc" -ne 0 ]; then echo "[rehearsal] without the kit: configure fails, as it must" >&2; exit 0; fi
    echo "[rehearsal] without the kit: configure PASSED: something is not hidden" >&2
    exit 1
  fi
  "$2/scripts/device-check.sh" "$3"
' rehearsal "$work" "$root" "$kokkos_root"
rc=$?
log "exit $rc; what the device run would bring back: $OUT"
exit "$rc"
