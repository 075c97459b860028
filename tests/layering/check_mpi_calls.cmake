# Fails if a source outside src/comm calls an MPI function (MPI_Xxx( ... ). Types and
# constants (MPI_Comm, MPI_COMM_NULL) may appear anywhere; calls go through comm
# (src/comm/collectives.hpp, the progress engine). Run: cmake -DOMGS_SOURCE_DIR=... -P this.
file(GLOB_RECURSE sources RELATIVE ${OMGS_SOURCE_DIR}
  ${OMGS_SOURCE_DIR}/src/*.cpp ${OMGS_SOURCE_DIR}/src/*.hpp ${OMGS_SOURCE_DIR}/src/*.h
  ${OMGS_SOURCE_DIR}/include/*.hpp ${OMGS_SOURCE_DIR}/include/*.h)
set(bad "")
set(checked 0)
foreach(f IN LISTS sources)
  if(f MATCHES "^src/comm/")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS ${OMGS_SOURCE_DIR}/${f} lines REGEX "P?MPI_[A-Z][a-z_]+[ ]*\\(")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "//.*$" "" code "${line}")  # comments may name MPI calls
    if(code MATCHES "P?MPI_[A-Z][a-z_]+[ ]*\\(")
      string(STRIP "${line}" line)
      list(APPEND bad "${f}: ${line}")
    endif()
  endforeach()
endforeach()
if(checked LESS 10)
  message(FATAL_ERROR "only ${checked} sources found under ${OMGS_SOURCE_DIR}: wrong folder?")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "MPI is called outside src/comm (move the call behind a function in "
                      "src/comm/collectives.hpp):\n  ${text}")
endif()
message(STATUS "no MPI calls outside src/comm in ${checked} sources")
