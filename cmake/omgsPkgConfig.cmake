# omgsPkgConfig.cmake - <prefix>/lib/pkgconfig/omgs.pc, generated from the targets.
#
# Cflags and Libs are the usage requirements of omgs as omgs::omgs carries them (not Kokkos
# Kernels, which only an example uses), read from the targets through the whole link
# interface (Kokkos::kokkos -> kokkoscore -> CUDA::cuda_driver, OpenMP::OpenMP_CXX,
# MPI::MPI_CXX, Threads::Threads, ...): compile options (e.g. Kokkos' -extended-lambda
# -arch=sm_90), definitions, include directories, link options and every library, with
# their generator expressions resolved for a C++ consumer (omgsGenex.cmake). hwloc comes
# through `Requires:`. Variables:
#   cxx              the compiler omgs was built with (CMAKE_CXX_COMPILER: nvcc_wrapper,
#                    hipcc or the host compiler); Kokkos' flags are for that compiler
#   kokkos_backends  Kokkos' backends (e.g. CUDA;SERIAL), kokkos_version
#   make CXX="$(pkg-config --variable=cxx omgs)" CXXFLAGS="$(pkg-config --cflags omgs)" ...
include(omgsGenex)

function(_omgs_pc_append property)
  set_property(GLOBAL APPEND PROPERTY _OMGS_PC_${property} ${ARGN})
endfunction()

# A library item of a link interface that is not a target: a file, a flag or a name.
function(_omgs_pc_library out item)
  set(${out} "" PARENT_SCOPE)
  if(item MATCHES "^-" OR item MATCHES "^\\$<")
    set(${out} "${item}" PARENT_SCOPE)
  elseif(IS_ABSOLUTE "${item}")
    get_filename_component(dir "${item}" DIRECTORY)
    get_filename_component(dirname "${dir}" NAME)
    if(dirname STREQUAL "stubs" AND item MATCHES "/lib([^/]+)\\.so$")
      # A link stub (CUDA's libcuda.so): linked by name; its directory must not be a run
      # path, the real library comes with the driver.
      set(${out} "-L${dir};-l${CMAKE_MATCH_1}" PARENT_SCOPE)
      return()
    endif()
    set(${out} "${item}" PARENT_SCOPE)
    if(item MATCHES "\\.so(\\.[0-9.]*)?$" AND NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
      _omgs_pc_append(RPATH "${dir}")
    endif()
  elseif(item)
    set(${out} "-l${item}" PARENT_SCOPE)
  endif()
endfunction()

# The usage requirements of one target, then (depth first) of the targets it links; its own
# library and plain libraries are put in front of everything found after them, so that each
# library precedes the ones it needs (static link order).
function(_omgs_pc_visit target)
  get_property(seen GLOBAL PROPERTY _OMGS_PC_SEEN)
  if(target IN_LIST seen OR target STREQUAL "PkgConfig::OMGS_HWLOC")  # hwloc: Requires
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY _OMGS_PC_SEEN ${target})
  foreach(property COMPILE_OPTIONS COMPILE_DEFINITIONS INCLUDE_DIRECTORIES LINK_OPTIONS
                   LINK_DIRECTORIES LINK_LIBRARIES)
    get_target_property(value ${target} INTERFACE_${property})
    if(NOT value)
      set(value "")
    endif()
    omgs_resolve_genex(${property} "${value}")
  endforeach()
  list(TRANSFORM COMPILE_DEFINITIONS PREPEND "-D")
  list(TRANSFORM LINK_DIRECTORIES PREPEND "-L")
  foreach(d IN LISTS INCLUDE_DIRECTORIES)
    if(d IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)  # -I/usr/include breaks <cstdlib>
      continue()
    elseif(IS_ABSOLUTE "${d}" AND EXISTS "${d}" OR d MATCHES "^\\$<")
      _omgs_pc_append(CFLAGS "-I${d}")
    endif()
  endforeach()
  _omgs_pc_append(CFLAGS ${COMPILE_OPTIONS} ${COMPILE_DEFINITIONS})
  _omgs_pc_append(LDFLAGS ${LINK_OPTIONS} ${LINK_DIRECTORIES})
  set(own "")
  get_target_property(type ${target} TYPE)
  get_target_property(imported ${target} IMPORTED)
  if(imported AND type MATCHES "^(STATIC|SHARED|UNKNOWN)_LIBRARY$")
    get_target_property(location ${target} LOCATION)
    _omgs_pc_library(own "${location}")
  endif()
  list(FILTER LINK_LIBRARIES EXCLUDE REGEX "^::@")  # CMake's directory-scope markers
  foreach(item IN LISTS LINK_LIBRARIES)
    if(TARGET ${item})
      _omgs_pc_visit(${item})
    elseif(item MATCHES "::")
      message(FATAL_ERROR "omgs.pc: ${target} links ${item}, a target not visible here")
    else()
      _omgs_pc_library(library "${item}")
      list(APPEND own ${library})
    endif()
  endforeach()
  get_property(libs GLOBAL PROPERTY _OMGS_PC_LIBS)
  set_property(GLOBAL PROPERTY _OMGS_PC_LIBS ${own} ${libs})
endfunction()

# Flags as one line for pkg-config: "SHELL:-Xcompiler -fopenmp" -> -Xcompiler -fopenmp,
# "LINKER:a,b" -> -Wl,a,b; repeated flags once (the last library of a repeated one).
function(_omgs_pc_line out property)
  get_property(items GLOBAL PROPERTY _OMGS_PC_${property})
  list(TRANSFORM items REPLACE "^SHELL:" "")
  list(TRANSFORM items REPLACE "^LINKER:" "-Wl,")
  if(property STREQUAL "LIBS")
    list(REVERSE items)
    list(REMOVE_DUPLICATES items)
    list(REVERSE items)
  else()
    list(REMOVE_DUPLICATES items)
  endif()
  list(REMOVE_ITEM items "")
  string(JOIN " " line ${items})
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

function(omgs_write_pkg_config)
  foreach(p SEEN CFLAGS LDFLAGS LIBS RPATH)
    set_property(GLOBAL PROPERTY _OMGS_PC_${p} "")
  endforeach()
  if(NOT TARGET Threads::Threads)  # found in src/comm, a directory-scoped target
    find_package(Threads REQUIRED)
  endif()
  _omgs_pc_visit(omgs)
  get_property(rpath GLOBAL PROPERTY _OMGS_PC_RPATH)
  list(REMOVE_DUPLICATES rpath)
  list(TRANSFORM rpath PREPEND "-Wl,-rpath,")
  if(BUILD_SHARED_LIBS)  # found at run time without LD_LIBRARY_PATH, wherever the prefix is
    list(PREPEND rpath "-Wl,-rpath,\${libdir}")
  endif()
  _omgs_pc_append(LDFLAGS ${rpath})
  foreach(p CFLAGS LDFLAGS LIBS)
    _omgs_pc_line(${p} ${p})
  endforeach()
  set(OMGS_PC_CFLAGS "${CFLAGS}")
  set(OMGS_PC_LIBS "${LDFLAGS} ${LIBS}")
  string(REPLACE ";" "," OMGS_PC_KOKKOS_BACKENDS "${OMGS_KOKKOS_BACKENDS}")
  set(OMGS_PC_REQUIRES "")
  if(OMGS_ENABLE_HWLOC)
    set(OMGS_PC_REQUIRES "Requires: hwloc >= 2")
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/omgs.pc.in ${PROJECT_BINARY_DIR}/omgs.pc.genex @ONLY)
  # What is left of the generator expressions (if any) is evaluated for the target omgs.
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/omgs.pc INPUT ${PROJECT_BINARY_DIR}/omgs.pc.genex
       TARGET omgs)
  install(FILES ${PROJECT_BINARY_DIR}/omgs.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
