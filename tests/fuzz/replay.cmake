# Corpus replay in the normal test suite: for each fuzz target of tests/fuzz, an executable
# built with the project's compiler and flags (no libFuzzer) from the target's source and
# replay_main.cpp, linked with omgs::omgs, and a test that runs it on every file of the
# committed corpus tests/fuzz/corpus/<target>/. Included from tests/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.cmake)
# To fuzz for real, see tests/fuzz/CMakeLists.txt and scripts/fuzz.sh.
set(_omgs_fuzz_dir "${CMAKE_CURRENT_LIST_DIR}")
foreach(_omgs_fuzz_target model_csv perf_json planners)
  set(_omgs_fuzz_exe omgs_fuzz_replay_${_omgs_fuzz_target})
  add_executable(${_omgs_fuzz_exe}
    "${_omgs_fuzz_dir}/fuzz_${_omgs_fuzz_target}.cpp" "${_omgs_fuzz_dir}/replay_main.cpp")
  target_link_libraries(${_omgs_fuzz_exe} PRIVATE omgs::omgs omgs_build_flags)
  add_test(NAME ${_omgs_fuzz_exe}
    COMMAND ${_omgs_fuzz_exe} "${_omgs_fuzz_dir}/corpus/${_omgs_fuzz_target}")
  set_tests_properties(${_omgs_fuzz_exe} PROPERTIES LABELS "plan;fuzz" TIMEOUT 120)
endforeach()
# The seed oracle in fuzz_planners.cpp must evaluate the seed's expressions as written, like
# the planners it checks (src/plan/CMakeLists.txt).
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties("${_omgs_fuzz_dir}/fuzz_planners.cpp" PROPERTIES
    COMPILE_OPTIONS "-ffp-contract=off")
endif()
unset(_omgs_fuzz_dir)
unset(_omgs_fuzz_exe)
unset(_omgs_fuzz_target)
