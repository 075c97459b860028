#!/usr/bin/env bash
# Prepares the device kit in .devkit/ (ignored by git): what a bare GPU machine with no
# package registry needs beside the checkout to build and check omgs (docs/portability.md,
# "A bare GPU machine: the device kit"). Downloads only; builds and installs nothing.
#
#   ./scripts/device-kit.sh [--dry-run] [--kokkos-git GITDIR] [--kokkos-tag TAG]
#
#   .devkit/kokkos-TAG.tar.gz  the Kokkos source (git archive of TAG from GITDIR, a clone of
#                              kokkos/kokkos; default $OMGS_KOKKOS_GIT, tag 4.6.01)
#   .devkit/debs/*.deb         Open MPI (runtime and development files), hwloc, Catch2 and
#                              pkg-config with their dependencies (scripts/devkit_resolve.py),
#                              from `apt-get download` (run `apt-get update` once first)
#   .devkit/MANIFEST           what is in the kit, with versions and sizes
# --dry-run prints the packages and the tarball it would fetch, and writes nothing.
# Exit status 2 on a usage error, 1 when something could not be fetched or the kit and the
# working tree together exceed OMGS_KIT_LIMIT_MIB (default 60: the device tool carries 64).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
log() { printf '[device-kit] %s\n' "$*" >&2; }
usage() {
  sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

# What omgs needs on a machine that has a C++ compiler, CMake and Python but no MPI
# development files, hwloc, Catch2 or pkg-config.
OMGS_KIT_PACKAGES=(libopenmpi-dev openmpi-bin libhwloc-dev catch2 pkgconf)

dry=0
kokkos_git="${OMGS_KOKKOS_GIT:-}"
tag=4.6.01
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --kokkos-git) [ $# -ge 2 ] || usage; kokkos_git="$2"; shift ;;
    --kokkos-tag) [ $# -ge 2 ] || usage; tag="$2"; shift ;;
    -h | --help) usage 0 ;;
    *) log "unknown argument '$1'"; usage ;;
  esac
  shift
done
# A working clone names its .git directory; a bare one (the fetched mirror) is the directory.
if [ -n "$kokkos_git" ] && [ -d "$kokkos_git/.git" ]; then
  kokkos_git="$kokkos_git/.git"
fi
git --git-dir="${kokkos_git:-/nonexistent}" rev-parse -q --verify "$tag^{commit}" >/dev/null 2>&1 || {
  log "no Kokkos tag '$tag' in '${kokkos_git:-(none given)}': pass --kokkos-git with a clone of kokkos/kokkos (or set OMGS_KOKKOS_GIT)"
  exit 2
}

pkgs="$(python3 "$here/devkit_resolve.py" "${OMGS_KIT_PACKAGES[@]}")"
tarball="kokkos-$tag.tar.gz"
if [ "$dry" -eq 1 ]; then
  echo "would write $root/.devkit/$tarball (git archive $tag of $kokkos_git)"
  echo "would download $(wc -l <<<"$pkgs") Debian packages into $root/.devkit/debs:"
  echo "$pkgs" | sed 's/^/  /'
  exit 0
fi

kit="$root/.devkit"
rm -rf "$kit.new"
mkdir -p "$kit.new/debs"
git --git-dir="$kokkos_git" archive --format=tar.gz --prefix="kokkos-$tag/" "$tag" \
  -o "$kit.new/$tarball"
# apt-get download names no dependency itself: the resolver gave the whole list.
# shellcheck disable=SC2086
(cd "$kit.new/debs" && apt-get download -q $pkgs >/dev/null 2>"$kit.new/download.log") || {
  log "apt-get download failed:"
  cat "$kit.new/download.log" >&2
  exit 1
}
rm -f "$kit.new/download.log"
{
  echo "# omgs device kit, made $(date -u '+%Y-%m-%d %H:%M UTC') by scripts/device-kit.sh"
  echo "kokkos $tag $(git --git-dir="$kokkos_git" rev-parse "$tag^{commit}") $tarball"
  for d in "$kit.new"/debs/*.deb; do
    echo "deb $(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version) $(stat -c %s "$d")"
  done
} >"$kit.new/MANIFEST"
rm -rf "$kit"
mv "$kit.new" "$kit"
grep -qx '/.devkit/' "$root/.gitignore" 2>/dev/null || log "warning: .devkit/ is not in .gitignore"

kit_b="$(du -sb "$kit" | cut -f 1)"
tree_b="$(git -C "$root" ls-files -z --cached --others --exclude-standard |
  (cd "$root" && du -cb --files0-from=- 2>/dev/null) | tail -n 1 | cut -f 1)"
limit_mib="${OMGS_KIT_LIMIT_MIB:-60}"
total_b=$((kit_b + tree_b))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "kit $kit: $(grep -c '^deb ' "$kit/MANIFEST") packages, $(mib "$kit_b") MiB; with the" \
  "working tree ($(mib "$tree_b") MiB) $(mib "$total_b") MiB of $limit_mib"
if [ "$total_b" -gt $((limit_mib * 1048576)) ]; then
  log "too large: the device tool carries 64 MiB in all"
  exit 1
fi
