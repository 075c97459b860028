# Runs one omgs-plan command and checks its exit status and output.
#   cmake -DCMD="exe;arg;..." -DEXPECT=fail|pass -DREGEX="..." -P run_cli.cmake
# EXPECT=fail: the command must exit non-zero and its stderr must match REGEX.
# EXPECT=pass: the command must exit 0 and its stdout must match REGEX.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "fail")
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected a failure, but the command succeeded:\n${out}")
  endif()
  if(NOT err MATCHES "${REGEX}")
    message(FATAL_ERROR "stderr does not match '${REGEX}':\n${err}")
  endif()
  if(NOT err MATCHES "^omgs-plan: error: ")
    message(FATAL_ERROR "the message must start with 'omgs-plan: error: ':\n${err}")
  endif()
else()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the command failed (${rc}):\n${err}")
  endif()
  if(NOT out MATCHES "${REGEX}")
    message(FATAL_ERROR "stdout does not match '${REGEX}':\n${out}")
  endif()
endif()
