# Configures omgs twice in a fresh build directory (no tests, no examples) and checks that
# both runs' summary line names the hwloc version: a re-run once printed "hwloc off"
# because a plain variable hid pkg-config's cached OMGS_HWLOC_VERSION.
# -DSOURCE_DIR -DBUILD -DKOKKOS_DIR -DPREFIX_PATH -DCXX -DC
file(REMOVE_RECURSE "${BUILD}")
foreach(run first second)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${BUILD}" -DOMGS_ENABLE_TESTS=OFF
            -DOMGS_ENABLE_EXAMPLES=OFF "-DKokkos_DIR=${KOKKOS_DIR}"
            "-DCMAKE_PREFIX_PATH=${PREFIX_PATH}" "-DCMAKE_CXX_COMPILER=${CXX}"
            "-DCMAKE_C_COMPILER=${C}"
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the ${run} configure failed (${rc}):\n${out}\n${err}")
  endif()
  string(REGEX MATCH "-- omgs [^\n]*" summary "${out}")
  if(NOT summary MATCHES "hwloc [0-9]+\\.[0-9]+")
    message(FATAL_ERROR "the ${run} configure's summary does not name the hwloc version: "
                        "'${summary}'")
  endif()
  message(STATUS "${run} configure: ${summary}")
endforeach()
file(REMOVE_RECURSE "${BUILD}")
