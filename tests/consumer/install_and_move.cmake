# Installs the build into STAGE, then moves it to PREFIX: nothing may refer to STAGE.
file(REMOVE_RECURSE "${STAGE}" "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${STAGE}"
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
file(RENAME "${STAGE}" "${PREFIX}")
file(GLOB_RECURSE cfg "${PREFIX}/*.cmake" "${PREFIX}/*.pc")
foreach(f IN LISTS cfg)
  file(READ "${f}" text)
  string(FIND "${text}" "${STAGE}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${f} refers to the install prefix ${STAGE}: the package is not relocatable")
  endif()
endforeach()
set(required include/omgs/omgs.hpp include/omgs/omgs.h include/omgs/export.hpp bin/omgs-plan
    share/omgs/models/resnet50.csv)
if(EXAMPLES)
  list(APPEND required bin/omgs-train-synthetic)
endif()
if(EXAMPLES AND MLP)  # omgs-train-mlp is built where Kokkos Kernels was found
  list(APPEND required bin/omgs-train-mlp)
endif()
foreach(required IN LISTS required)
  if(NOT EXISTS "${PREFIX}/${required}")
    message(FATAL_ERROR "the install lacks ${required}")
  endif()
endforeach()
# The installed example job runs (as an MPI singleton) and finds its models next to itself
# in share/omgs/models, with no source tree.
if(EXAMPLES)
  execute_process(COMMAND "${PREFIX}/bin/omgs-train-synthetic" --model resnet50 --numel-scale 0.001
    --iterations 1 --warmup 0 --planners single --no-dense --quiet
    WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "share/omgs/models/resnet50.csv")
    message(FATAL_ERROR "the installed omgs-train-synthetic failed (${rc}):\n${out}\n${err}")
  endif()
endif()
