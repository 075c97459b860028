# Install rules and the CMake / pkg-config packages of omgs:
#   <prefix>/include/omgs/...                  headers (with the generated export.hpp, config.hpp)
#   <prefix>/lib/libomgs.{a,so}                the library
#   <prefix>/bin/omgs-plan ...                 tools and example jobs
#   <prefix>/share/omgs/models/*.csv           bundled model descriptions
#   <prefix>/lib/cmake/omgs/omgsConfig.cmake   find_package(omgs), target omgs::omgs
#   <prefix>/lib/pkgconfig/omgs.pc             for Makefile-based codes
# Every path in the CMake package is relative to the config file, so the prefix can move.
include(CMakePackageConfigHelpers)
if(BUILD_SHARED_LIBS)
  set(BUILD_SHARED_LIBS_BOOL ON)
else()
  set(BUILD_SHARED_LIBS_BOOL OFF)
endif()

set(OMGS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/omgs" CACHE STRING
    "Where omgsConfig.cmake is installed, relative to the prefix")

install(TARGETS omgs EXPORT omgsTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/omgs DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/omgs DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS omgs-plan RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/models/ DESTINATION ${CMAKE_INSTALL_DATADIR}/omgs/models
  FILES_MATCHING PATTERN "*.csv" PATTERN "*.md" PATTERN "*.py")

install(EXPORT omgsTargets NAMESPACE omgs:: DESTINATION ${OMGS_INSTALL_CMAKEDIR})
# Which MPI this omgs was built with (omgsConfig.cmake makes consumers use the same one).
set(OMGS_MPI_VENDOR "")
foreach(_v "Open MPI" "MVAPICH" "Intel" "Cray" "MPICH")  # derived ones before MPICH
  if(MPI_CXX_LIBRARY_VERSION_STRING MATCHES "${_v}" AND NOT OMGS_MPI_VENDOR)
    set(OMGS_MPI_VENDOR "${_v}")
  endif()
endforeach()
# The C++ runtime a C-only consumer of a static libomgs must link (the C linker omits it).
set(OMGS_CXX_RUNTIME_LIBS "${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES}")
set(OMGS_CXX_RUNTIME_DIRS "${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/omgsConfig.cmake.in
  ${PROJECT_BINARY_DIR}/omgsConfig.cmake
  INSTALL_DESTINATION ${OMGS_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/omgsConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/omgsConfig.cmake
  ${PROJECT_BINARY_DIR}/omgsConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/omgsKokkos.cmake
  DESTINATION ${OMGS_INSTALL_CMAKEDIR})

# pkg-config: flags of the dependencies as this build resolved them.
set(_pc_cflags "")
set(_pc_libs "")
set(_pc_rpath "")
get_target_property(_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
if(OMGS_KOKKOS_FLAVOR STREQUAL "trilinos")
  foreach(d IN LISTS _kokkos_inc)
    string(APPEND _pc_cflags " -I${d}")
  endforeach()
  get_target_property(_kokkos_libs Kokkos::kokkos INTERFACE_LINK_LIBRARIES)
  get_target_property(_kk_libs Kokkos::kokkoskernels INTERFACE_LINK_LIBRARIES)
  foreach(l IN LISTS _kk_libs _kokkos_libs)
    if(EXISTS "${l}")
      string(APPEND _pc_libs " ${l}")
    endif()
  endforeach()
else()
  foreach(t Kokkos::kokkoscore Kokkos::kokkoscontainers Kokkos::kokkossimd Kokkos::kokkoskernels)
    if(TARGET ${t})
      get_target_property(_loc ${t} LOCATION)
      if(_loc AND EXISTS "${_loc}")
        string(APPEND _pc_libs " ${_loc}")
        get_filename_component(_dir "${_loc}" DIRECTORY)
        if(NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
          list(APPEND _pc_rpath "${_dir}")
        endif()
      endif()
      get_target_property(_inc ${t} INTERFACE_INCLUDE_DIRECTORIES)
      foreach(d IN LISTS _inc)
        if(EXISTS "${d}")
          string(APPEND _pc_cflags " -I${d}")
        endif()
      endforeach()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _pc_rpath)
  foreach(d IN LISTS _pc_rpath)
    string(APPEND _pc_libs " -Wl,-rpath,${d}")
  endforeach()
  # Kokkos_DEVICES only exists inside omgs_find_kokkos(); OMGS_KOKKOS_BACKENDS is its copy.
  if("OPENMP" IN_LIST OMGS_KOKKOS_BACKENDS)
    string(APPEND _pc_cflags " -fopenmp")
    string(APPEND _pc_libs " -fopenmp")
  endif()
endif()
foreach(d IN LISTS MPI_CXX_INCLUDE_DIRS)
  string(APPEND _pc_cflags " -I${d}")
endforeach()
foreach(l IN LISTS MPI_CXX_LIBRARIES)
  string(APPEND _pc_libs " ${l}")
endforeach()
if(OMGS_ENABLE_HWLOC)
  set(OMGS_PC_REQUIRES "Requires: hwloc >= 2")
else()
  set(OMGS_PC_REQUIRES "")
endif()
set(OMGS_PC_CFLAGS "${_pc_cflags}")
set(OMGS_PC_LIBS "${_pc_libs}")
# A shared libomgs is found at run time without LD_LIBRARY_PATH (${libdir} is the
# relocatable prefix the .pc file sits in when the consumer is built).
if(BUILD_SHARED_LIBS)
  set(OMGS_PC_LIBS "-Wl,-rpath,\${libdir} ${OMGS_PC_LIBS}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/omgs.pc.in ${PROJECT_BINARY_DIR}/omgs.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/omgs.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
