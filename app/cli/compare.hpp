#pragma once
// `moesim compare`: runs of several result.json files side by side, each metric with its ratio
// against the first run, as an aligned table or CSV.
#include <ostream>
#include <string>
#include <vector>

namespace moesim {

/// What to compare and how to print it.
struct CompareOptions {
  std::vector<std::string> files;    ///< result.json files (or result folders holding one)
  std::vector<std::string> metrics;  ///< dotted metric paths; empty = the defaults present
  bool csv = false;
};

/// The metrics compared when none is asked for, in this order, those that some run has: the
/// latency and throughput figures of a prefill run and of a serving run.
const std::vector<std::string>& default_compare_metrics();

/// Writes the comparison of every run of every file to `os`. Throws InputError for an unreadable
/// or malformed file (located at its line and column) and for a metric no run has, or that names
/// a group of metrics rather than one (listing the valid names).
void compare_results(const CompareOptions& options, std::ostream& os);

}  // namespace moesim
