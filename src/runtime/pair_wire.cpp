// The names of RuntimeOptions::pair_wire (PairWire, comm.hpp); its value type on the wire is
// detail::wire_values (comm/pair_codec.hpp).
#include <string>

#include <omgs/runtime.hpp>

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
