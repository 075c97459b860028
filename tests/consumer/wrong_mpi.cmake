# Configures the CMake consumer against PREFIX with another MPI's compiler wrapper
# (WRONG_MPICXX): find_package(omgs) must fail and say which MPI omgs was built with.
file(REMOVE_RECURSE "${BUILD}")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE}" -B "${BUILD}" "-DCMAKE_PREFIX_PATH=${PREFIX}"
  "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_C_COMPILER=${C}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DMPI_CXX_COMPILER=${WRONG_MPICXX}"
  "-DMPI_C_COMPILER=${WRONG_MPICC}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "configuring with ${WRONG_MPICXX} succeeded; it must fail")
endif()
string(REPLACE "\n" " " all "${out} ${err}")
string(REGEX REPLACE "  +" " " all "${all}")
if(NOT all MATCHES "omgs was built with ${VENDOR}")
  message(FATAL_ERROR "no clear message about the MPI mismatch:\n${out}\n${err}")
endif()
message(STATUS "refused as expected: omgs was built with ${VENDOR}")
