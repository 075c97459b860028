// Shared by the fuzz targets: an invariant check that reports and aborts (libFuzzer then
// saves the input that broke it).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#ifndef OMGS_FUZZ_TARGET
#error "define OMGS_FUZZ_TARGET (the target's name, for messages) before including this"
#endif

namespace omgs_fuzz {

[[noreturn]] inline void fail(const char* what, int line, const std::string& detail) {
  std::fprintf(stderr, "%s: invariant violated (line %d): %s\n  %s\n", OMGS_FUZZ_TARGET, line, what,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace omgs_fuzz

// `detail` is only evaluated when the check fails.
#define OMGS_FUZZ_REQUIRE(cond, detail)                      \
  do {                                                       \
    if (!(cond)) omgs_fuzz::fail(#cond, __LINE__, (detail)); \
  } while (0)
