// Internal: text helpers shared by the SVG charts (svg.cpp, sweep.cpp).
#pragma once

#include <string>

namespace omgs::detail {

/// s with &, <, > and " escaped for XML text and attributes.
std::string xml_escape(const std::string& s);
/// v with one decimal (coordinates).
std::string fmt(double v);

}  // namespace omgs::detail
