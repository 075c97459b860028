# Finds everything omgs needs. Each missing dependency stops configure with the
# exact command that installs it on Debian / Ubuntu (and the Spack spec).
include(omgsKokkos)

function(omgs_missing what debian spack)
  message(FATAL_ERROR
    "omgs: ${what} was not found.\n"
    "  Debian/Ubuntu: sudo apt-get install ${debian}\n"
    "  Spack:         spack install ${spack}  (then spack load ${spack})\n"
    "  Or point CMake at an existing install with -DCMAKE_PREFIX_PATH=<prefix>.")
endfunction()

omgs_find_kokkos()

set(MPI_CXX_SKIP_MPICXX ON)
set(MPI_DETERMINE_LIBRARY_VERSION ON)  # recorded in omgsConfig.cmake (consumers' MPI check)
find_package(MPI COMPONENTS C CXX QUIET)
if(NOT MPI_C_FOUND OR NOT MPI_CXX_FOUND)
  omgs_missing("MPI (C and C++)" "libopenmpi-dev openmpi-bin" "openmpi")
endif()

# OMGS_HWLOC_VERSION is pkg-config's cache entry: a plain variable of that name would hide it
# on a re-run (pkg_check_modules does not check again), so the summary has its own.
set(OMGS_HWLOC_SUMMARY "off")
if(OMGS_ENABLE_HWLOC)
  find_package(PkgConfig QUIET)
  if(NOT PKG_CONFIG_FOUND)
    omgs_missing("pkg-config (needed to find hwloc; -DOMGS_ENABLE_HWLOC=OFF builds without)" "pkg-config" "pkgconf")
  endif()
  pkg_check_modules(OMGS_HWLOC QUIET IMPORTED_TARGET hwloc>=2)
  if(NOT OMGS_HWLOC_FOUND)
    omgs_missing("hwloc >= 2 (pkg-config module 'hwloc'; -DOMGS_ENABLE_HWLOC=OFF builds without)" "libhwloc-dev" "hwloc")
  endif()
  set(OMGS_HWLOC_SUMMARY "${OMGS_HWLOC_VERSION}")
endif()

if(OMGS_ENABLE_TESTS)
  find_package(Catch2 3 QUIET)
  if(NOT Catch2_FOUND)
    find_package(Catch2 2 QUIET)
  endif()
  if(NOT Catch2_FOUND)
    omgs_missing("Catch2 (v3 or v2, for the tests; -DOMGS_ENABLE_TESTS=OFF skips them)" "catch2" "catch2")
  endif()
  set(OMGS_CATCH2_MAJOR ${Catch2_VERSION_MAJOR})
  if(NOT OMGS_CATCH2_MAJOR)
    string(REGEX MATCH "^[0-9]+" OMGS_CATCH2_MAJOR "${Catch2_VERSION}")
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
endif()
