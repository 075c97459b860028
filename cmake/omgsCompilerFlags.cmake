# Warning and sanitizer flags for every omgs target (not propagated to consumers).
add_library(omgs_build_flags INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(omgs_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra>)
  if(OMGS_ENABLE_WARNINGS_AS_ERRORS)
    target_compile_options(omgs_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
  endif()
endif()
if(OMGS_SANITIZE)
  target_compile_options(omgs_build_flags INTERFACE
    -fsanitize=${OMGS_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(omgs_build_flags INTERFACE -fsanitize=${OMGS_SANITIZE})
endif()
