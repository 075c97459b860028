// What a plan costs in memory per rank (its groups' rows), and the byte counts that bound it
// (PlanConfig::memory_budget_bytes, omgs-plan --memory-budget, OMGS_MEMORY_BUDGET).
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include <omgs/plan.hpp>

#include "plan/collective_table.hpp"

namespace omgs {

namespace {

// The multiplier of a unit, or 0 if the unit is not known.
double unit_bytes(std::string_view unit) {
  struct Unit {
    const char* name;
    double bytes;
  };
  static const Unit units[] = {{"", 1.0},       {"B", 1.0},      {"KiB", 0x1p10}, {"MiB", 0x1p20},
                               {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"kB", 1e3},     {"KB", 1e3},
                               {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12}};
  for (const Unit& u : units)
    if (unit == u.name) return u.bytes;
  return 0.0;
}

}  // namespace

std::uint64_t parse_byte_size(std::string_view text) {
  const std::string s(text);
  auto bad = [&](const std::string& why) {
    return Error("omgs: '" + s + "' is not a byte count (" + why +
                 "; e.g. 4096, 512MiB, 2GiB, 1.5GB)");
  };
  std::size_t digits = 0;
  while (digits < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits])) != 0 || s[digits] == '.'))
    ++digits;
  if (digits == 0) throw bad("no number");
  char* end = nullptr;
  const std::string number = s.substr(0, digits);
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v)) throw bad("no number");
  const double unit = unit_bytes(std::string_view(s).substr(digits));
  if (unit == 0.0) throw bad("unknown unit '" + s.substr(digits) + "'");
  const double bytes = std::floor(v * unit);
  if (!(bytes < 0x1p64)) throw bad("more than 2^64-1 bytes");
  return static_cast<std::uint64_t>(bytes);
}

std::vector<double> group_memory_bytes(const Plan& plan, int workers, double density) {
  std::vector<double> out;
  out.reserve(plan.groups.size());
  for (const Group& g : plan.groups)
    out.push_back(detail::collective_row(g.collective).memory_bytes(g.numel, workers, density));
  return out;
}

}  // namespace omgs
