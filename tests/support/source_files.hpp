#pragma once
// The checkout a test reads its data from (MOESIM_SOURCE_ROOT, set by meson; "." otherwise) and
// the text of a file in it.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace moesim::testing_support {

inline std::string source_root() {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return root ? root : ".";
}

/// The whole text of `path` ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace moesim::testing_support
