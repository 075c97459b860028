// omgs::Error: the one exception type omgs throws at init.
#pragma once

#include <stdexcept>
#include <string>

#include <omgs/export.hpp>

namespace omgs {

/// Thrown by set-up calls (planning, parsing, construction). The message names the
/// layer, rank, option, file line or field at fault. Per-iteration calls never throw.
class OMGS_EXPORT Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace omgs
