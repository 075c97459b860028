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

# pkg-config: omgs.pc from the targets (omgsPkgConfig.cmake).
include(omgsPkgConfig)
omgs_write_pkg_config()
