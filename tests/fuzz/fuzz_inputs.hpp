#pragma once
// What the fuzz targets of issue 30 (fuzz_trace, fuzz_lengths, fuzz_json) do with one input,
// shared with tests/app/test_fuzz_regressions.cpp, which replays their saved inputs through it.
// Each function throws InputError (or TimeRangeError, an input too extreme to simulate) for bad
// input, as the CLI would report it, and BrokenProperty when an input that was accepted breaks
// what the code promises about it: a finding, like any other exception, a crash or a sanitizer
// report.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/compare.hpp"
#include "app/scenario/scenario.hpp"
#include "app/sweep/sweep.hpp"
#include "app/sweep/sweep_log.hpp"
#include "core/diagnostics.hpp"
#include "core/json_input.hpp"
#include "serving/request_trace.hpp"
#include "serving/workload.hpp"

namespace moesim::fuzz {

/// An accepted input that breaks a promise of the code that read it.
class BrokenProperty : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw BrokenProperty(what);
}

/// A folder of this process's own (fuzzing jobs run side by side) for the readers that take
/// paths; removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("moesim-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  // Registered once `dir` is constructed, so it runs before `dir` is destroyed.
  [[maybe_unused]] static const bool cleanup = std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
  }) == 0;
  return dir;
}

inline void write_file(const std::filesystem::path& p, std::string_view text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// ---- fuzz_trace ---------------------------------------------------------------------------

/// `text` is a request-trace CSV. parse_request_trace refuses it with every problem located in
/// the file (line and column >= 1), or returns rows in file order with arrivals finite, >= 0 and
/// sorted, and whole token counts >= 1. Replayed as a serving workload (generate_requests reads
/// the trace from a file), the rows become requests 0.. with the rows' lengths, arriving in order.
inline void trace_input(const std::string& text) {
  std::vector<TraceRequest> rows;
  try {
    rows = parse_request_trace(text, "fuzz.csv");
  } catch (const InputError& e) {
    require(!e.diagnostics().empty(), "a request-trace InputError without diagnostics");
    for (const auto& d : e.diagnostics())
      require(d.where.file == "fuzz.csv" && d.where.line >= 1 && d.where.column >= 1,
              "a request-trace error not located at a line and column: " + d.to_string());
    throw;
  }
  require(!rows.empty(), "a request trace read with no rows");
  int last_line = 1;
  double last_time = 0.0;
  for (const auto& r : rows) {
    const std::string at = "row of line " + std::to_string(r.line) + ": ";
    require(r.line > last_line, at + "rows out of file order (previous line " + std::to_string(last_line) + ")");
    require(std::isfinite(r.arrived_at_s) && r.arrived_at_s >= 0.0, at + "arrival not finite and >= 0");
    require(r.arrived_at_s >= last_time, at + "arrivals not sorted");
    require(r.prompt_tokens >= 1 && r.output_tokens >= 1, at + "a token count below 1");
    last_line = r.line;
    last_time = r.arrived_at_s;
  }
  const auto path = scratch_dir() / "trace.csv";
  write_file(path, text);
  ServingWorkload w;
  w.arrival.process = ArrivalSpec::Process::kTrace;
  w.arrival.file = path.string();
  w.requests = static_cast<std::int64_t>(rows.size());
  const std::vector<RequestSpec> reqs = generate_requests(w, 1);  // TimeRangeError past ~53 days
  require(reqs.size() == rows.size(), "the replayed trace has " + std::to_string(reqs.size()) + " requests, not " +
                                          std::to_string(rows.size()));
  Tick last_arrival = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const RequestSpec& q = reqs[i];
    const std::string at = "request " + std::to_string(i) + ": ";
    require(q.id == static_cast<std::int64_t>(i), at + "id " + std::to_string(q.id));
    require(q.arrival >= last_arrival, at + "arrives before the previous request, or before 0");
    require(q.prompt_tokens == rows[i].prompt_tokens && q.output_tokens == rows[i].output_tokens,
            at + "lengths differ from its row's");
    last_arrival = q.arrival;
  }
}

// ---- fuzz_lengths -------------------------------------------------------------------------

/// The scenario a length-distribution input is loaded in: the first byte's low bit picks the key
/// (0: prompt_tokens, 1: output_tokens), the rest is its YAML value, written last in `workload:`
/// (so a block mapping on the following lines continues it). The model's context is the largest
/// allowed, so that only the distribution's own limits apply.
inline std::string length_scenario(std::string_view data) {
  std::string yaml =
      "model: {preset: switch-base-8, layers: 2, max_context: 1000000000}\nhardware: hgx-a100-4gpu-nvlink\n"
      "policy: [static-ep]\nworkload:\n  kind: serving\n  requests: 64\n";
  const bool output = !data.empty() && (static_cast<unsigned char>(data[0]) & 1u) != 0;
  yaml += output ? "  prompt_tokens: 16\n  output_tokens: " : "  output_tokens: 4\n  prompt_tokens: ";
  if (!data.empty()) yaml += data.substr(1);
  return yaml + "\n";
}

/// The longest prompt or output a length distribution may give (docs/design.md, "Input limits").
inline constexpr std::int64_t kMaxRequestTokens = 100'000'000;

inline void check_length_dist(const LengthDist& d, const std::string& key) {
  const std::int64_t lo = d.smallest(), hi = d.largest();
  require(lo >= 1 && lo <= hi && hi <= kMaxRequestTokens,
          key + ": lengths [" + std::to_string(lo) + ", " + std::to_string(hi) + "] outside [1, 1e8]");
  const double mean = d.expected();
  require(std::isfinite(mean) && mean >= static_cast<double>(lo) - 0.5 && mean <= static_cast<double>(hi) + 0.5,
          key + ": expected() " + std::to_string(mean) + " outside [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
}

/// A length distribution, through the scenario loader; when it loads, its bounds and mean are
/// checked and up to 64 requests drawn (the workload only: nothing is simulated), each of whose
/// lengths must lie in [1, 1e8] and within its distribution's smallest() and largest().
inline void length_input(std::string_view data) {
  const Scenario s = load_scenario_text(length_scenario(data), "fuzz.yaml", {}, "scenarios");
  if (s.workload_kind != WorkloadKind::kServing) return;
  ServingWorkload w = s.serving_workload;
  check_length_dist(w.prompt, "prompt_tokens");
  check_length_dist(w.output, "output_tokens");
  w.requests = std::min<std::int64_t>(w.requests, 64);
  for (const RequestSpec& r : generate_requests(w, s.seed)) {
    const std::string at = "request " + std::to_string(r.id) + ": ";
    require(r.prompt_tokens >= std::max<std::int64_t>(1, w.prompt.smallest()) &&
                r.prompt_tokens <= std::min(kMaxRequestTokens, w.prompt.largest()),
            at + "prompt of " + std::to_string(r.prompt_tokens) + " tokens, outside [" +
                std::to_string(w.prompt.smallest()) + ", " + std::to_string(w.prompt.largest()) + "] or [1, 1e8]");
    require(r.output_tokens >= std::max<std::int64_t>(1, w.output.smallest()) &&
                r.output_tokens <= std::min(kMaxRequestTokens, w.output.largest()),
            at + "output of " + std::to_string(r.output_tokens) + " tokens, outside [" +
                std::to_string(w.output.smallest()) + ", " + std::to_string(w.output.largest()) + "] or [1, 1e8]");
  }
}

// ---- fuzz_json ----------------------------------------------------------------------------

/// The sweep the fixed folders of fuzz_json belong to: one grid axis of two values, over a small
/// serving scenario whose hash (file_fnv1a) the seeds' sweep.json files carry.
struct FixedSweep {
  SweepSpec spec;
  nlohmann::json definition;  ///< whole sweep (no "shard")
  std::vector<SweepPoint> points;

  FixedSweep() {
    spec.file = "/fuzz/sweep.yaml";
    spec.grids.push_back(SweepAxis{"--grid", "serving.max_num_seqs=8,16", "serving.max_num_seqs", {"8", "16"}});
    definition = sweep_definition(spec,
                                  "model: {preset: switch-base-8, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\n"
                                  "workload: {kind: serving, requests: 4, prompt_tokens: 16, output_tokens: 2}\n"
                                  "policy: [static-ep]\n");
    points = expand_points(spec);
  }
  /// Point `p`'s results.jsonl line, as `moesim sweep` writes it.
  nlohmann::json line(std::size_t p) const {
    return {{"point", p},
            {"overrides", overrides_json(points[p])},
            {"runs", nlohmann::json::array({nlohmann::json{
                         {"label", "static-ep"}, {"policy", "static-ep"}, {"predictor", "none"},
                         {"predictor_label", "none"},
                         {"metrics", {{"makespan_ms", 1.5 + static_cast<double>(p)}}}}})}};
  }
  /// A folder written by `moesim sweep --out DIR` (`shard` "K/N", or "" for the whole sweep)
  /// holding the points of its shard.
  void write(const std::filesystem::path& dir, const std::string& shard) const {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    nlohmann::json d = definition;
    SweepShard s;
    if (!shard.empty()) {
      d["shard"] = shard;
      s = parse_sweep_shard(shard);
    }
    std::string jsonl;
    for (const auto& p : points)
      if (s.has(p.index)) jsonl += line(p.index).dump() + "\n";
    write_file(dir / "sweep.json", d.dump(2) + "\n");
    write_file(dir / "results.jsonl", jsonl);
  }
};

inline const FixedSweep& fixed_sweep() {
  static const FixedSweep sweep;
  return sweep;
}

/// A sweep folder from fuzz text: its sweep.json, and after the first blank line (if any) its
/// results.jsonl.
inline void write_sweep_folder(const std::filesystem::path& dir, std::string_view text) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto cut = text.find("\n\n");
  write_file(dir / "sweep.json", text.substr(0, cut));
  if (cut != std::string_view::npos) write_file(dir / "results.jsonl", text.substr(cut + 2));
}

/// A merged folder must be a whole sweep that `moesim sweep --out` resumes as complete.
inline void check_merged(const std::filesystem::path& out, const SweepOutcome& outcome) {
  try {
    const std::string def_path = (out / "sweep.json").string();
    const nlohmann::json def = parse_json_input(read_text_file(def_path), def_path, "merged sweep.json");
    require(!def.contains("shard"), "the merged sweep.json names a shard");
    const SweepSpec spec = sweep_spec_from_definition(def, def_path);
    const std::vector<SweepPoint> points = expand_points(spec);
    require(outcome.points == points.size(), "the merge reports " + std::to_string(outcome.points) +
                                                 " points, its sweep.json defines " + std::to_string(points.size()));
    const ResultsLog log = read_results_log(out.string(), def, points, "");
    require(std::all_of(log.done.begin(), log.done.end(), [](bool b) { return b; }),
            "the merged results.jsonl lacks points");
    require(std::filesystem::exists(out / "results.csv"), "the merge wrote no results.csv");
  } catch (const InputError& e) {
    throw BrokenProperty(std::string("the merged folder does not read back: ") + e.what());
  }
}

/// The first byte picks the reader, the rest is the text it reads:
///   0: `moesim compare FILE`, 1: the same with --csv, 2: with `--metric`s, the names listed
///      comma-separated on the text's first line (the rest is the file);
///   3: a resume reading results.jsonl (the text) of the fixed sweep;
///   4: `moesim sweep merge` of one folder written from the text (see write_sweep_folder);
///   5: the same of the fixed sweep's shard 1/2 and that folder;
///   6: merging the whole fixed sweep into a --out written from the text.
/// A merge that succeeds must leave a folder that reads back as the whole sweep.
inline void json_input(std::string_view data) {
  namespace fs = std::filesystem;
  if (data.empty()) return;
  const auto selector = static_cast<unsigned char>(data[0]) % 7u;
  std::string_view text = data.substr(1);
  const fs::path dir = scratch_dir();
  if (selector <= 2) {
    CompareOptions o;
    o.csv = selector == 1;
    if (selector == 2) {
      const auto nl = text.find('\n');
      std::string_view names = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      while (!names.empty()) {
        const auto comma = names.find(',');
        o.metrics.emplace_back(names.substr(0, comma));
        names.remove_prefix(comma == std::string_view::npos ? names.size() : comma + 1);
      }
    }
    fs::create_directories(dir / "run");
    write_file(dir / "run" / "result.json", text);
    o.files = {(dir / "run" / "result.json").string()};
    std::ostringstream os;
    compare_results(o, os);
    require(!os.str().empty(), "compare printed nothing");
    return;
  }
  const FixedSweep& fixed = fixed_sweep();
  if (selector == 3) {
    const fs::path log_dir = dir / "log";
    fs::remove_all(log_dir);
    fs::create_directories(log_dir);
    write_file(log_dir / "sweep.json", fixed.definition.dump(2) + "\n");
    write_file(log_dir / "results.jsonl", text);
    const ResultsLog log = read_results_log(log_dir.string(), fixed.definition, fixed.points, " (fuzz)");
    require(log.done.size() == fixed.points.size(), "done is not one flag per point");
    require(static_cast<std::size_t>(std::count(log.done.begin(), log.done.end(), true)) == log.lines.size(),
            "not one line per done point");
    require(log.intact_bytes <= text.size() && (log.intact_bytes == 0 || text[log.intact_bytes - 1] == '\n'),
            "the intact prefix does not end at a line's end");
    std::set<std::size_t> seen;
    for (const auto& l : log.lines) {
      const auto p = l.at("point").get<std::size_t>();
      require(p < fixed.points.size() && seen.insert(p).second, "a line of no point, or of a point twice");
    }
    return;
  }
  const fs::path a = dir / "a", b = dir / "b", out = dir / "merged";
  fs::remove_all(out);
  std::vector<std::string> dirs;
  if (selector == 6) {
    fixed.write(a, "");
    write_sweep_folder(out, text);
  } else {
    write_sweep_folder(a, text);
    if (selector == 5) {
      fixed.write(b, "1/2");
      dirs.push_back(b.string());
    }
  }
  dirs.push_back(a.string());
  check_merged(out, merge_sweeps(dirs, out.string()));
}

}  // namespace moesim::fuzz
