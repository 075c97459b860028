// The names of RuntimeOptions::pair_wire (runtime.hpp) and its value type on the wire.
#include <string>

#include <omgs/runtime.hpp>

#include "runtime/group_exchange.hpp"

namespace omgs {

std::string_view to_string(PairWire wire) {
  switch (wire) {
    case PairWire::pairs8:
      return "pairs8";
    case PairWire::fp32:
      return "fp32";
    case PairWire::bf16:
      return "bf16";
    case PairWire::fp16:
      return "fp16";
  }
  return "unknown";
}

PairWire parse_pair_wire(std::string_view name) {
  for (PairWire w : {PairWire::pairs8, PairWire::fp32, PairWire::bf16, PairWire::fp16})
    if (name == to_string(w)) return w;
  throw Error("omgs: unknown pair_wire '" + std::string(name) +
              "' (expected pairs8, fp32, bf16 or fp16)");
}

}  // namespace omgs

namespace omgs::detail {

WireValues wire_values(PairWire wire) {
  return wire == PairWire::bf16   ? WireValues::bf16
         : wire == PairWire::fp16 ? WireValues::fp16
                                  : WireValues::fp32;
}

}  // namespace omgs::detail
