# omgsKokkos.cmake - one way to get Kokkos and Kokkos Kernels, whichever install is there.
#
# After omgs_find_kokkos() the imported target Kokkos::kokkos exists, and
# OMGS_KOKKOS_VERSION, OMGS_KOKKOS_FLAVOR ("upstream" | "trilinos") and OMGS_KOKKOS_BACKENDS
# are set in the caller's scope. Kokkos::kokkoskernels exists where Kokkos Kernels was found
# (OMGS_HAVE_KOKKOS_KERNELS): only the example omgs-train-mlp needs it, so a device build
# without Kokkos Kernels (e.g. a hand-built Kokkos for CUDA) builds everything else.
#
# * Upstream Kokkos (>= 4, also 3.x; Spack, source builds) ships a config package that
#   defines Kokkos::kokkos / Kokkos::kokkoskernels: those are used as they are.
# * Debian's libtrilinos-kokkos-dev is Kokkos 3.4.01 built by TriBITS. Its config package
#   defines trilinos_kokkoscore (etc.) without usage requirements, plus a Kokkos::kokkos
#   whose include directory is computed as <prefix>/include from a prefix four levels
#   above the config file: /usr/lib/include, which does not exist (the headers live in
#   /usr/include/trilinos). The shim gives Kokkos::kokkos the real header directory and
#   libraries instead of trusting those targets.
#
# This file is installed with omgs and used by omgsConfig.cmake, so consumers resolve
# Kokkos exactly the way the library was built.

function(_omgs_kokkos_fail what)
  message(FATAL_ERROR
    "omgs: ${what}\n"
    "  Debian/Ubuntu: sudo apt-get install libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev\n"
    "  Spack:         spack install kokkos kokkos-kernels\n"
    "  Or point CMake at an install with -DKokkos_ROOT=<prefix> -DKokkosKernels_ROOT=<prefix>.")
endfunction()

# Builds an INTERFACE IMPORTED target from Trilinos-style library names.
function(_omgs_trilinos_target target header include_hint)
  find_path(_omgs_inc_${header} NAMES ${header}
    HINTS ${include_hint} PATH_SUFFIXES trilinos NO_CACHE)
  if(NOT _omgs_inc_${header})
    _omgs_kokkos_fail("found a Trilinos-packaged Kokkos, but not its header ${header}.")
  endif()
  set(_libs "")
  foreach(name IN LISTS ARGN)
    find_library(_omgs_lib_${name} NAMES ${name} NO_CACHE)
    if(NOT _omgs_lib_${name})
      _omgs_kokkos_fail("found a Trilinos-packaged Kokkos, but not its library ${name}.")
    endif()
    list(APPEND _libs ${_omgs_lib_${name}})
  endforeach()
  if(NOT TARGET ${target})
    add_library(${target} INTERFACE IMPORTED)
  endif()
  set_target_properties(${target} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_omgs_inc_${header}}"
    INTERFACE_LINK_LIBRARIES "${_libs};${CMAKE_DL_LIBS}")
endfunction()

# Upstream Kokkos with the OpenMP back-end asks for find_dependency(OpenMP COMPONENTS CXX),
# which FindOpenMP can only check with the CXX language enabled: a C-only consumer (the C
# API; Kokkos is link-only there) failed "Could NOT find OpenMP (missing: OpenMP_CXX_FOUND
# CXX)". It gets the OpenMP runtime of its C compiler instead (GCC and Clang link the same
# libgomp / libomp for C and C++). A macro: the variables must reach find_package(Kokkos).
macro(_omgs_openmp_for_c_only)
  get_property(_omgs_enabled GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST _omgs_enabled AND NOT "CXX" IN_LIST _omgs_enabled
     AND NOT TARGET OpenMP::OpenMP_CXX)
    find_package(OpenMP QUIET COMPONENTS C)
    if(OpenMP_C_FOUND)
      add_library(OpenMP::OpenMP_CXX INTERFACE IMPORTED)
      set_target_properties(OpenMP::OpenMP_CXX PROPERTIES
        INTERFACE_LINK_LIBRARIES "${OpenMP_C_LIBRARIES}")
      set(OpenMP_CXX_FOUND TRUE)
    endif()
  endif()
endmacro()

# omgs_find_kokkos([KOKKOS_HINT dir] [KERNELS_HINT dir]): the hints (the config directories
# the omgs build used) are searched before the system paths, after the caller's own
# Kokkos_ROOT / CMAKE_PREFIX_PATH.
function(omgs_find_kokkos)
  cmake_parse_arguments(ARG "" "KOKKOS_HINT;KERNELS_HINT" "" ${ARGN})
  _omgs_openmp_for_c_only()
  # Called even when Kokkos::kokkos exists: a consumer may have found Debian's broken one.
  find_package(Kokkos CONFIG QUIET HINTS ${ARG_KOKKOS_HINT})
  if(Kokkos_FOUND AND ("trilinos_kokkoscore" IN_LIST Kokkos_LIBRARIES OR TARGET trilinos_kokkoscore))
    set(flavor trilinos)
    _omgs_trilinos_target(Kokkos::kokkos Kokkos_Core.hpp "${Kokkos_INCLUDE_DIRS}"
      trilinos_kokkoscore trilinos_kokkoscontainers trilinos_kokkosalgorithms)
    set_property(TARGET Kokkos::kokkos PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_14)
  elseif(TARGET Kokkos::kokkos)
    set(flavor upstream)
  else()
    _omgs_kokkos_fail("Kokkos was not found.")
  endif()
  if(Kokkos_VERSION VERSION_LESS 3.4)
    _omgs_kokkos_fail("Kokkos ${Kokkos_VERSION} is too old: omgs needs Kokkos 3.4 or newer.")
  endif()

  if(NOT TARGET Kokkos::kokkoskernels)
    find_package(KokkosKernels CONFIG QUIET HINTS ${ARG_KERNELS_HINT})
  endif()
  if(NOT TARGET Kokkos::kokkoskernels)
    if(KokkosKernels_FOUND AND "trilinos_kokkoskernels" IN_LIST KokkosKernels_LIBRARIES
       AND NOT flavor STREQUAL "trilinos")
      # Debian's Kokkos Kernels (in /usr) is built on Debian's Kokkos 3.4: not for this one.
      message(STATUS "omgs: ignoring the Trilinos-packaged Kokkos Kernels in ${KokkosKernels_DIR}: "
                     "it is built on Trilinos' Kokkos, this build uses Kokkos ${Kokkos_VERSION}")
    elseif(KokkosKernels_FOUND AND "trilinos_kokkoskernels" IN_LIST KokkosKernels_LIBRARIES)
      _omgs_trilinos_target(Kokkos::kokkoskernels KokkosBlas1_scal.hpp "${KokkosKernels_INCLUDE_DIRS}"
        trilinos_kokkoskernels)
      set_property(TARGET Kokkos::kokkoskernels APPEND PROPERTY
        INTERFACE_LINK_LIBRARIES Kokkos::kokkos)
    endif()
  endif()
  if(TARGET Kokkos::kokkoskernels)
    set(OMGS_HAVE_KOKKOS_KERNELS ON PARENT_SCOPE)
  else()
    set(OMGS_HAVE_KOKKOS_KERNELS OFF PARENT_SCOPE)
  endif()

  set(OMGS_KOKKOS_FLAVOR ${flavor} PARENT_SCOPE)
  set(OMGS_KOKKOS_VERSION ${Kokkos_VERSION} PARENT_SCOPE)
  set(OMGS_KOKKOS_BACKENDS "${Kokkos_DEVICES}" PARENT_SCOPE)
endfunction()
