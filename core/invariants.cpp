#include "core/invariants.hpp"

namespace moesim {

std::string_view invariant_name(Invariant which) {
  switch (which) {
    case Invariant::kRequestOnce: return "request-once";
    case Invariant::kExactOutput: return "exact-output";
    case Invariant::kRequestCausality: return "request-causality";
    case Invariant::kKvWithinCapacity: return "kv-within-capacity";
    case Invariant::kKvBalanced: return "kv-balanced";
    case Invariant::kKvHandOver: return "kv-hand-over";
    case Invariant::kSelectionsConserved: return "selections-conserved";
    case Invariant::kAllToAllBalanced: return "all-to-all-balanced";
    case Invariant::kMetricSet: return "metric-set";
  }
  return "unknown";
}

InvariantBroken::InvariantBroken(Invariant which, const std::string& detail)
    : std::logic_error("invariant " + std::string(invariant_name(which)) + " broken: " + detail), which_(which) {}

}  // namespace moesim
