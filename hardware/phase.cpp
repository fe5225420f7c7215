#include "hardware/phase.hpp"

namespace moesim {

const char* phase_name(Phase p) {
  // Indexed by the tag's value (hardware/phase.hpp).
  static constexpr const char* kNames[] = {"other",   "attention", "router", "dispatch",   "experts", "combine",
                                           "merge",   "dense",     "schedule", "fetch", "collective", "predict"};
  const auto i = static_cast<std::size_t>(p);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace moesim
