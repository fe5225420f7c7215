#pragma once
// `moesim sweep`: one scenario run at many points of a parameter space. Points are the cartesian
// product of the --grid axes, with the --zip axes advancing together as one more dimension; each
// point is a set of `--set`-style overrides. Results stream to DIR/results.jsonl as points finish
// (so an interrupted sweep resumes) and are tabulated into DIR/results.csv, sorted by point.
// `moesim guideline` shares its value lists, number printing and thread pool.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run/parallel.hpp"

namespace moesim {

/// One swept key: `key.path=v1,v2,start:stop:step` after range expansion.
struct SweepAxis {
  std::string option;               ///< "--grid" or "--zip": where diagnostics point
  std::string spec;                 ///< the text given on the command line
  std::string key;                  ///< scenario key path, as `--set` takes it
  std::vector<std::string> values;  ///< YAML text of each value, ranges expanded
};

/// Everything that defines a sweep's results (not how it is run: --out and --jobs are not here).
struct SweepSpec {
  std::string file;  ///< scenario YAML
  std::vector<SweepAxis> grids;
  std::vector<SweepAxis> zips;
  std::vector<std::string> sets;  ///< fixed overrides, applied before each point's own
};

/// One point: its index in the expansion order and its overrides, grid keys first (in the order
/// given), then zip keys.
struct SweepPoint {
  std::size_t index = 0;
  std::vector<std::pair<std::string, std::string>> overrides;  ///< (key, YAML value)
  std::vector<const SweepAxis*> axes;                           ///< the axis of each override
};

/// A deterministic 1/N slice of a sweep's points, for running one sweep on N machines: point i
/// belongs to shard K (1-based) when i mod N = K - 1, so every shard gets points from all over
/// the grid (slow regions are shared out, not given to one machine).
struct SweepShard {
  std::size_t index = 1;  ///< K, 1 ... count
  std::size_t count = 1;  ///< N; 1 is the whole sweep
  bool has(std::size_t point) const { return point % count == index - 1; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

/// Parses `K/N` (1 <= K <= N <= 1,000,000). Throws InputError located at "--shard TEXT".
SweepShard parse_sweep_shard(const std::string& text);

/// How to run a sweep.
struct SweepOptions {
  std::string out_dir;
  unsigned jobs = 1;
  bool progress = false;  ///< draw a progress bar on stderr
  /// Up to this many pending points keep the Scenario loaded for validation until they run,
  /// instead of loading it again (loading costs about twice a small point's run; a loaded
  /// small scenario holds about 100 KB, so the default bounds that memory to a few hundred MB).
  std::size_t keep_loaded = 4096;
  SweepShard shard;  ///< run only these points (DIR holds this shard; `merge_sweeps` joins shards)
};

/// What a sweep did; `ran` is 0 when every point was already in results.jsonl.
struct SweepOutcome {
  std::size_t points = 0;        ///< in the whole sweep
  std::size_t already_done = 0;  ///< found in results.jsonl and skipped
  std::size_t ran = 0;           ///< simulated by this invocation
  std::size_t failed = 0;        ///< points whose run raised an input error (recorded, not retried)
  std::size_t csv_rows = 0;      ///< data rows of results.csv
};

/// Parses a value list `v1,v2,...`: YAML text split at top-level commas (`[a,b]` and quoted
/// commas stay whole), each `start:stop:step` of three numbers expanded. Throws InputError
/// located at `where` for an empty value or a bad range.
std::vector<std::string> parse_value_list(const std::string& text, const std::string& where);

/// A number as a value list prints it: 12 significant digits, which hide the binary error of
/// start + i * step (1.6000000000000001 prints 1.6), and never "-0".
std::string format_number(double v);

/// A CSV field per RFC 4180: quoted only when it holds a separator, quote or line break.
std::string csv_field(const std::string& s);

/// Parses `key=v1,v2,...` given to `option`. Values are YAML text split at top-level commas
/// (`[a,b]` and quoted commas stay whole); a value `start:stop:step` of three numbers is expanded.
/// Throws InputError located at "<option> <spec>".
SweepAxis parse_sweep_axis(const std::string& option, const std::string& spec);

/// Expands `start:stop:step` into its values, stop included within floating-point tolerance.
/// Integers stay integers; other values print with 12 significant digits (no float noise).
/// Returns no values when `text` is not a range (not three numbers separated by ':').
std::vector<std::string> expand_range(const std::string& text, const std::string& where);

/// Every point, grids as nested loops in the order given (the last varies fastest), then the zip
/// dimension. Throws InputError when zip lists differ in length or a key is swept twice or also
/// `--set`.
std::vector<SweepPoint> expand_points(const SweepSpec& spec);

/// The overrides of `p` as `--set` strings.
std::vector<std::string> point_overrides(const SweepPoint& p);

/// 64-bit FNV-1a of `text` as 16 hex digits: a stable fingerprint of a scenario file (std::hash
/// is not stable across builds), so a sweep's or plan's shards can check they read the same one.
std::string fnv1a_hex(const std::string& text);

/// The definition stored in DIR/sweep.json: the file (absolute) and a hash of its text
/// `file_text`, the axes with their expanded values, the --set overrides, and "shard": "K/N" when
/// DIR holds one shard of N > 1 (absent for a whole sweep).
nlohmann::json sweep_definition(const SweepSpec& spec, const std::string& file_text, const SweepShard& shard = {});

/// The spec a stored definition describes (the inverse of sweep_definition, up to how ranges were
/// spelt). Throws InputError located at `where` when `definition` is not one.
SweepSpec sweep_spec_from_definition(const nlohmann::json& definition, const std::string& where);

/// results.csv from results.jsonl lines (any order; sorted by point here). Columns: point, one per
/// swept key, policy, label, predictor, predictor_label (if any run has one), error (if any point
/// failed), then every scalar metric flattened with dots, in first-seen order over the sorted
/// points (which is alphabetical, as result objects keep their keys sorted). Arrays are left out.
/// `rows` receives the number of data rows.
std::string sweep_csv(const SweepSpec& spec, std::vector<nlohmann::json> lines, std::size_t* rows = nullptr);

/// `moesim sweep merge`: joins the shard folders `dirs` of one sweep into `out_dir` (sweep.json,
/// results.jsonl sorted by point, results.csv), exactly as one machine running the whole sweep
/// would have written them (results.jsonl in point order rather than completion order). Throws
/// InputError, writing nothing, when the folders are of different sweeps, overlap, or miss points.
SweepOutcome merge_sweeps(const std::vector<std::string>& dirs, const std::string& out_dir);

/// Runs the sweep (validating every pending point first; see the command's help) and returns
/// what it did. Throws InputError for bad input, before anything is written.
SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options);

}  // namespace moesim
