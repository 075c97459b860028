// Tests' count of a plan's groups by collective (plan and runtime tests alike).
#pragma once

#include <cstddef>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs_test {

/// How many of `groups` use collective `c`.
inline std::size_t count_collective(const std::vector<omgs::Group>& groups, omgs::Collective c) {
  std::size_t n = 0;
  for (const omgs::Group& g : groups) n += g.collective == c;
  return n;
}

}  // namespace omgs_test
