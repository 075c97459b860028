# Checks omgs-device-probe (device_probe.c) for BACKEND: with a device it must run the
# command; without one it must exit 77 and say SKIPPED with a reason; bad usage exits 2.
execute_process(COMMAND "${PROBE}" ${BACKEND} -- "${CMAKE_COMMAND}" -E echo "ran: device usable"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 AND out STREQUAL "ran: device usable\n")
  message(STATUS "${BACKEND}: a device is usable here; the command ran")
elseif(rc EQUAL 77 AND out MATCHES "^SKIPPED: [^\n]+\n$")
  message(STATUS "${BACKEND}: ${out}")
else()
  message(FATAL_ERROR "omgs-device-probe ${BACKEND}: exit ${rc}, output '${out}' '${err}'")
endif()
foreach(bad "nodevice;--;true" "${BACKEND};true" "${BACKEND}")
  execute_process(COMMAND "${PROBE}" ${bad} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "usage:|unknown backend 'nodevice'")
    message(FATAL_ERROR "omgs-device-probe ${bad}: exit ${rc} ('${err}'), expected 2 and a message")
  endif()
endforeach()
