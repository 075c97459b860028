// Includes Catch2 whichever major version is installed (Debian 12 ships 2.13).
#pragma once

#if OMGS_CATCH2_MAJOR >= 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <string>
using Catch::Approx;
namespace Catch {
// Catch2 v2 spelling, used throughout the tests.
inline auto Contains(const std::string& s) {
  return Matchers::ContainsSubstring(s);
}
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
