# The installed example job runs (as an MPI singleton) and finds its models next to itself
# in PREFIX/share/omgs/models, with no source tree.
execute_process(COMMAND "${PREFIX}/bin/omgs-train-synthetic" --model resnet50 --numel-scale 0.001
  --iterations 1 --warmup 0 --planners single --no-dense --quiet
  WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "share/omgs/models/resnet50.csv")
  message(FATAL_ERROR "the installed omgs-train-synthetic failed (${rc}):\n${out}\n${err}")
endif()
