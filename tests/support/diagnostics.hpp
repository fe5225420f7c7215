#pragma once
// Assertion helpers over a list of diagnostics (the errors an InputError carries).
#include <string>
#include <vector>

#include "core/diagnostics.hpp"

namespace moesim::testing_support {

/// True when some diagnostic's "FILE:LINE:COL: error: message" contains `what`.
inline bool mentions(const std::vector<Diagnostic>& d, const std::string& what) {
  for (const auto& x : d)
    if (x.to_string().find(what) != std::string::npos) return true;
  return false;
}

}  // namespace moesim::testing_support
