// Includes Catch2 whichever major version is installed (Debian 12 ships 2.13).
#pragma once

#if OMGS_CATCH2_MAJOR >= 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
