# Shared by scripts/run-example.sh and scripts/test.sh: installs what is missing (Debian /
# Ubuntu), then configures and builds omgs. Source it; do not run it.

OMGS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian / Ubuntu packages the build, the tests and the examples need.
OMGS_APT_PACKAGES=(
  g++ cmake make pkg-config python3
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  libopenmpi-dev openmpi-bin
  libhwloc-dev
  catch2
  libboost-dev
)

omgs_log() { printf '[omgs] %s\n' "$*" >&2; }

# The libtorch example (omgs-train-torch) and its data: libtorch 1.13 with its CMake config
# (~600 MB installed), Fashion-MNIST (30 MB) and zlib for the IDX reader. Installed unless
# OMGS_ENABLE_TORCH_EXAMPLE=OFF is in the environment (CMake builds the example where it
# finds Torch; CTest then trains it for a few hundred batches).
OMGS_TORCH_APT_PACKAGES=(libtorch-dev dataset-fashion-mnist zlib1g-dev)

# Installs the missing packages with apt when run as root; otherwise prints the exact
# command and stops.
omgs_ensure_packages() {
  if [ "${OMGS_ENABLE_TORCH_EXAMPLE:-AUTO}" = "OFF" ]; then
    omgs_ensure_apt_packages "${OMGS_APT_PACKAGES[@]}"
  else
    omgs_ensure_apt_packages "${OMGS_APT_PACKAGES[@]}" "${OMGS_TORCH_APT_PACKAGES[@]}"
  fi
}

# omgs_mpi_flavour: "openmpi" or "mpich", from the mpiexec on PATH (MPICH's
# mpiexec.hydra when there is no plain mpiexec). Only meaningful once the packages are
# installed: call omgs_ensure_packages first (a fresh machine has no mpiexec at all, and
# the answer made before the install was always "mpich").
omgs_mpi_flavour() {
  if mpiexec --version 2>&1 | grep -q -e "Open MPI" -e "OpenRTE"; then
    echo openmpi
  elif command -v mpiexec >/dev/null 2>&1 || command -v mpiexec.mpich >/dev/null 2>&1; then
    echo mpich
  else
    omgs_log "no MPI launcher (mpiexec) on PATH after installing the packages"
    return 1
  fi
}

# omgs_prepare_mpi: installs what is missing, then names the MPI that will run the jobs.
# One function so that the order (install, then detect) cannot be undone by a caller.
omgs_prepare_mpi() {
  omgs_ensure_packages >&2
  omgs_mpi_flavour
}

omgs_jobs() {
  local n
  n="$(nproc 2>/dev/null || echo 2)"
  echo "${OMGS_JOBS:-$n}"
}

# omgs_configure BUILD_DIR [extra cmake arguments...]
omgs_configure() {
  local dir="$1"
  shift
  omgs_log "configuring in ${dir}"
  cmake -S "$OMGS_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="${OMGS_BUILD_TYPE:-RelWithDebInfo}" \
    ${OMGS_ENABLE_TORCH_EXAMPLE:+"-DOMGS_ENABLE_TORCH_EXAMPLE=$OMGS_ENABLE_TORCH_EXAMPLE"} "$@" >"$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log" >&2
    exit 1
  }
}

# omgs_build BUILD_DIR [extra cmake arguments...]: configures, then builds every target.
omgs_build() {
  omgs_configure "$@"
  omgs_log "building with $(omgs_jobs) jobs"
  cmake --build "$1" -j "$(omgs_jobs)"
}

# omgs_ensure_apt_packages PACKAGE...: installs those of the packages that are missing
# (scripts/fuzz.sh uses it for clang and its libFuzzer runtime).
omgs_ensure_apt_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    omgs_log "not a Debian/Ubuntu system: make sure these are installed: $*"
    return 0
  fi
  local missing=()
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  if [ "$(id -u)" -eq 0 ]; then
    omgs_log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    omgs_log "missing packages: ${missing[*]}"
    omgs_log "install them with:"
    printf '  sudo apt-get install -y %s\n' "${missing[*]}" >&2
    exit 1
  fi
}
