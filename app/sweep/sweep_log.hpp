#pragma once
// A sweep directory on disk: DIR/sweep.json (the definition) and DIR/results.jsonl (one line per
// finished point). `moesim sweep` reads it to resume; `moesim sweep merge` reads shard folders.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/sweep/sweep.hpp"

namespace moesim {

/// A whole file; a missing one is the user's mistake (InputError, exit 2), not an internal error.
std::string read_text_file(const std::string& path);

/// The point lines a results.jsonl holds (validated against the sweep's points), which points
/// they cover, and the byte length of the file's intact prefix: a last line cut short by an
/// interrupted write is dropped (and rewritten by a resume).
struct ResultsLog {
  std::vector<nlohmann::json> lines;
  std::vector<bool> done;  ///< by point index
  std::uintmax_t intact_bytes = 0;
};

/// Reads DIR for a resume: refuses a sweep.json of another `definition` (`refuse` ends each such
/// message with what the user can do), or results.jsonl lines that are not this sweep's points, so
/// results of two sweeps never mix. An absent directory or file is an empty log.
ResultsLog read_results_log(const std::string& dir, const nlohmann::json& definition,
                            const std::vector<SweepPoint>& points, const std::string& refuse);

/// A point's overrides as results.jsonl stores them: {key: YAML value text}.
nlohmann::json overrides_json(const SweepPoint& p);

}  // namespace moesim
