#!/usr/bin/env bash
# The device kit's scripts (docs/portability.md, "A bare GPU machine: the device kit"), the
# parts that run in seconds: the resolver's choices on a saved `apt-cache depends` output,
# each script's argument handling, and device-check.sh unpacking a kit of one real .deb
# (built here with dpkg-deb) into a private prefix. The whole rehearsal (a Kokkos and omgs
# build) is scripts/device-rehearsal.sh, run by hand.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
box="$(mktemp -d)"
trap 'rm -rf "$box"' EXIT
fails=0
check() { # check WHAT EXPECTED_RC EXPECTED_OUTPUT_REGEX COMMAND...
  local what="$1" want_rc="$2" want="$3" rc=0
  shift 3
  "$@" >"$box/out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qE -- "$want" "$box/out"; then
    echo "FAILED: $what: exit $rc (wanted $want_rc), output:"
    sed 's/^/  | /' "$box/out"
    fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}

# The resolver: first real alternative, a virtual package's provider, the base and the
# packages never needed left out (in parentheses), Recommends not followed.
want='libopenmpi-dev: (gfortran-12) libopenmpi3 openmpi-common (libibverbs-dev) libhwloc-dev (libevent-dev) (libpmix-dev) (libjs-jquery) (libjs-jquery-ui) (zlib1g-dev) openmpi-bin
openmpi-bin: (libc6) libevent-core-2.1-7 libopenmpi3 openmpi-common (openssh-client)
libhwloc15: (libc6) libudev1'
got="$(python3 "$root/scripts/devkit_resolve.py" --parse "$root/tests/scripts/devkit_depends.txt")"
if [ "$got" = "$want" ]; then echo "ok: resolver choices"; else
  printf 'FAILED: resolver choices:\n%s\nwanted:\n%s\n' "$got" "$want"
  fails=$((fails + 1))
fi
check "resolver without packages" 2 "name at least one package" \
  python3 "$root/scripts/devkit_resolve.py"

check "device-kit.sh: unknown argument" 2 "unknown argument '--bogus'" \
  "$root/scripts/device-kit.sh" --bogus
check "device-kit.sh: no Kokkos clone" 2 "no Kokkos tag '4.6.01' in '$box/none'" \
  "$root/scripts/device-kit.sh" --kokkos-git "$box/none"

check "device-check.sh: no KOKKOS_ROOT" 2 "device-check.sh \[--dry-run\] KOKKOS_ROOT" \
  "$root/scripts/device-check.sh"
check "device-check.sh: KOKKOS_ROOT missing" 2 "'$box/none' is not a directory" \
  "$root/scripts/device-check.sh" "$box/none"
check "device-check.sh: no kit" 2 "no device kit at $box/none" \
  env OMGS_KIT="$box/none" "$root/scripts/device-check.sh" "$box"

# A kit of one real package: a pkg-config file with Debian's prefix=/usr and a header.
pkg="$box/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/usr/lib/x86_64-linux-gnu/pkgconfig" "$pkg/usr/include" "$box/kit/debs"
printf 'Package: omgs-kit-probe\nVersion: 1.0\nArchitecture: all\nMaintainer: omgs\nDescription: test\n' \
  >"$pkg/DEBIAN/control"
printf 'prefix=/usr\nincludedir=${prefix}/include\nName: probe\nDescription: t\nVersion: 1.0\nCflags: -I${includedir}\n' \
  >"$pkg/usr/lib/x86_64-linux-gnu/pkgconfig/omgs-kit-probe.pc"
echo '#define OMGS_KIT_PROBE 1' >"$pkg/usr/include/omgs_kit_probe.h"
dpkg-deb --root-owner-group --build "$pkg" "$box/kit/debs/omgs-kit-probe_1.0_all.deb" >/dev/null
kitenv=(env OMGS_KIT="$box/kit" OMGS_KIT_MPI=kit)

check "device-check.sh --dry-run" 0 "MPI: the kit's Open MPI" \
  "${kitenv[@]}" OMGS_KIT_PREFIX="$box/prefix" "$root/scripts/device-check.sh" --dry-run "$box"
check "device-check.sh refuses to unpack over /" 2 "refusing to unpack the kit into '/'" \
  "${kitenv[@]}" OMGS_KIT_PREFIX=/ "$root/scripts/device-check.sh" --unpack-only
check "device-check.sh --unpack-only" 0 "^PKG_CONFIG_PATH=$box/prefix/usr/lib/x86_64-linux-gnu/pkgconfig:" \
  "${kitenv[@]}" OMGS_KIT_PREFIX="$box/prefix" "$root/scripts/device-check.sh" --unpack-only
pc="$box/prefix/usr/lib/x86_64-linux-gnu/pkgconfig/omgs-kit-probe.pc"
if grep -qx "prefix=$box/prefix/usr" "$pc" 2>/dev/null && [ -f "$box/prefix/usr/include/omgs_kit_probe.h" ]; then
  echo "ok: unpacked, pkg-config prefix rewritten"
else
  echo "FAILED: the unpacked prefix: $(cat "$pc" 2>&1)"
  fails=$((fails + 1))
fi

check "device-rehearsal.sh --help" 0 "--without-kit KOKKOS_ROOT" \
  "$root/scripts/device-rehearsal.sh" --help
check "device-rehearsal.sh: unknown option" 2 "unknown option '--bogus'" \
  "$root/scripts/device-rehearsal.sh" --bogus
check "device-rehearsal.sh: no kit" 2 "no device kit at $box/none" \
  env OMGS_KIT="$box/none" "$root/scripts/device-rehearsal.sh" "$box"

if [ "$fails" -eq 0 ]; then echo "device_kit: PASSED"; else echo "device_kit: $fails FAILED"; exit 1; fi
