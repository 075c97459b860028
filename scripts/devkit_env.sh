# shellcheck shell=bash
# The device kit's private prefix (docs/portability.md, "A bare GPU machine: the device kit"):
# unpacks the kit's Debian packages there (never over /) and points the build and the MPI
# launcher at it. Sourced by scripts/device-check.sh; do not run it.

# Packages of the MPI itself: left out where the machine's own MPI is used, so that its
# libmpi is the only one on the library path.
OMGS_KIT_MPI_PACKAGES='^(openmpi-.*|libopenmpi.*|libpmix.*)$'

# omgs_kit_system_mpi_ok: whether the machine's own MPI compiles and runs a program.
omgs_kit_system_mpi_ok() {
  command -v mpicc >/dev/null 2>&1 && command -v mpiexec >/dev/null 2>&1 || return 1
  local t flags=()
  t="$(mktemp -d)"
  printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' >"$t/m.c"
  if mpiexec --version 2>&1 | grep -q -e "Open MPI" -e "OpenRTE"; then
    flags=(--oversubscribe)
    [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  fi
  mpicc "$t/m.c" -o "$t/m" >/dev/null 2>&1 && timeout 60 mpiexec -n 1 "${flags[@]}" "$t/m" >/dev/null 2>&1
  local rc=$?
  rm -rf "$t"
  return "$rc"
}

# omgs_kit_unpack KIT PREFIX WITH_MPI(0|1): unpacks KIT/debs/*.deb into PREFIX (emptied
# first), adds the MPI wrapper names that Debian's alternatives would make, and rewrites the
# pkg-config files' prefix=/usr to the private prefix.
omgs_kit_unpack() {
  local kit="$1" prefix="$2" with_mpi="$3" d name n=0
  case "$prefix" in
    "" | / | /usr | /usr/local) omgs_log "refusing to unpack the kit into '$prefix'"; return 2 ;;
  esac
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for d in "$kit"/debs/*.deb; do
    [ -e "$d" ] || { omgs_log "no .deb in $kit/debs (run scripts/device-kit.sh)"; return 2; }
    name="$(dpkg-deb -f "$d" Package 2>/dev/null || basename "$d" | cut -d _ -f 1)"
    if [ "$with_mpi" -eq 0 ] && [[ "$name" =~ $OMGS_KIT_MPI_PACKAGES ]]; then
      continue
    fi
    omgs_kit_extract "$d" "$prefix" || return 1
    n=$((n + 1))
  done
  if [ "$with_mpi" -eq 1 ]; then
    for w in mpicc mpicxx mpic++ mpiCC mpiexec mpirun; do
      [ -e "$prefix/usr/bin/$w.openmpi" ] && ln -sf "$w.openmpi" "$prefix/usr/bin/$w"
    done
  fi
  find "$prefix" -name '*.pc' -type f -exec sed -i "s|^prefix=/usr\$|prefix=$prefix/usr|" {} +
  omgs_log "unpacked $n packages into $prefix"
}

# omgs_kit_extract DEB DIR: dpkg-deb -x where dpkg exists, else ar and tar (a machine that is
# not Debian-based still has binutils beside its compiler).
omgs_kit_extract() {
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  local t member
  t="$(mktemp -d)"
  (cd "$t" && ar x "$1") || return 1
  member="$(ls "$t"/data.tar.* 2>/dev/null | head -n 1)"
  tar -xf "$member" -C "$2"
  rm -rf "$t"
}

# omgs_kit_env PREFIX WITH_MPI: the environment of a build and run against the kit.
omgs_kit_env() {
  local p="$1/usr" a
  a="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
  export PATH="$p/bin:$PATH"
  export LD_LIBRARY_PATH="$p/lib/$a:$1/lib/$a${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$p/lib/$a/pkgconfig:$p/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CMAKE_PREFIX_PATH="$p${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}"
  # Debian's multiarch headers (hwloc/autogen/config.h): the compiler searches
  # /usr/include/<triplet> by default, the private prefix's only when told.
  export CPATH="$p/include/$a${CPATH:+:$CPATH}"
  if [ "$2" -eq 1 ]; then
    export LD_LIBRARY_PATH="$p/lib/$a/openmpi/lib:$LD_LIBRARY_PATH"
    # Open MPI and PMIx find their plugins, help texts and wrapper data from these.
    export OPAL_PREFIX="$p" PMIX_PREFIX="$p/lib/$a/pmix2" MPI_HOME="$p"
    # PMIX_PREFIX does not move PMIx's plugin directory: without this, mpiexec in a
    # namespace that hides the system's PMIx ran with none ("pcompress ... unavailable").
    export PMIX_MCA_mca_base_component_path="$p/lib/$a/pmix2/lib/pmix"
    # Containers and VMs often refuse the cross-memory attach of the shared-memory transport.
    export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
  fi
}
