// `moesim sweep`: validates every point, runs them on a pool of threads, streams each finished
// point to DIR/results.jsonl (the resume log) and tabulates DIR/results.csv at the end.
//
// Threads share nothing mutable but the log and the progress bar (one mutex): each point loads its
// own Scenario and run_scenario builds its own cluster, routing model, policies and simulator;
// the registries are only read after static initialisation.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "app/cli/cli.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "app/run/progress_bar.hpp"
#include "app/sweep/sweep.hpp"
#include "app/sweep/sweep_log.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

// Diagnostics past this many failing points are summarised in one line.
constexpr std::size_t kMaxReportedPoints = 10;

// Names the point in each diagnostic, and points an override's location at the axis it came from.
InputError at_point(const InputError& e, const SweepPoint& p) {
  std::string name;
  for (const auto& [k, v] : p.overrides) name += (name.empty() ? "" : ", ") + k + "=" + v;
  std::vector<Diagnostic> out;
  for (Diagnostic d : e.diagnostics()) {
    for (std::size_t i = 0; i < p.overrides.size(); ++i)
      if (d.where.file == "--set " + p.overrides[i].first + "=" + p.overrides[i].second)
        d.where.file = p.axes[i]->option + " " + p.overrides[i].first + "=" + p.overrides[i].second;
    d.message += " (sweep point " + std::to_string(p.index) + ": " + name + ")";
    out.push_back(std::move(d));
  }
  return InputError(std::move(out));
}

// The scenario file read once; every point loads from this text with its own overrides.
struct Base {
  const SweepSpec& spec;
  std::string text;
  std::string dir;

  Scenario load(const SweepPoint& p) const {
    std::vector<std::string> overrides = spec.sets;
    for (std::string& o : point_overrides(p)) overrides.push_back(std::move(o));
    return load_scenario_text(text, spec.file, overrides, dir);
  }
};

// Runs f(), naming `p` in any InputError it throws.
template <class F>
auto at(const SweepPoint& p, F f) {
  try {
    return f();
  } catch (const InputError& e) {
    throw at_point(e, p);
  }
}

// Loads and checks every pending point; throws one InputError listing the first failures.
// Returns the loaded scenarios when `keep` (else nothing), so that running need not load again.
std::vector<std::optional<Scenario>> validate_points(const Base& base, const std::vector<const SweepPoint*>& pending,
                                                     unsigned jobs, bool keep) {
  std::vector<std::vector<Diagnostic>> problems(pending.size());
  std::vector<std::optional<Scenario>> loaded(keep ? pending.size() : 0);
  parallel_for(pending.size(), jobs, [&](std::size_t i) {
    try {
      at(*pending[i], [&] {
        Scenario s = base.load(*pending[i]);
        check_scenario_fits(s);
        if (keep) loaded[i] = std::move(s);
      });
    } catch (const InputError& e) {
      problems[i] = e.diagnostics();
    }
  });
  std::vector<Diagnostic> all;
  std::size_t bad = 0;
  for (const auto& d : problems)
    if (!d.empty() && ++bad <= kMaxReportedPoints) all.insert(all.end(), d.begin(), d.end());
  if (bad > kMaxReportedPoints)
    all.push_back({SourceLocation{base.spec.file, 0, 0}, std::to_string(bad) + " of " + std::to_string(pending.size()) +
                                                            " points are invalid; the first " +
                                                            std::to_string(kMaxReportedPoints) + " are shown"});
  if (!all.empty()) throw InputError(std::move(all));
  return loaded;
}

}  // namespace

SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  const fs::path scenario_path(spec.file);
  const Base base{spec, read_text_file(spec.file), scenario_path.has_parent_path() ? scenario_path.parent_path().string() : "."};
  const std::vector<SweepPoint> points = expand_points(spec);
  const nlohmann::json definition = sweep_definition(spec, base.text, options.shard);
  const fs::path dir(options.out_dir);
  ResultsLog log = read_results_log(dir.string(), definition, points,
                                    "; choose another --out, or delete the directory to start over");
  std::vector<const SweepPoint*> pending;
  std::size_t in_shard = 0;
  for (const auto& p : points) {
    if (!options.shard.has(p.index)) continue;
    ++in_shard;
    if (!log.done[p.index]) pending.push_back(&p);
  }
  std::vector<std::optional<Scenario>> loaded =
      validate_points(base, pending, options.jobs, pending.size() <= options.keep_loaded);

  // Only now, with every point known good, does anything reach the disk.
  fs::create_directories(dir);
  write_atomically(dir / "sweep.json", definition.dump(2) + "\n");
  const fs::path jsonl = dir / "results.jsonl";
  if (fs::exists(jsonl)) fs::resize_file(jsonl, log.intact_bytes);
  std::ofstream out(jsonl, std::ios::app | std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + jsonl.string());
  std::mutex out_mutex;
  ProgressBar bar("sweep", "points", in_shard, in_shard - pending.size(), options.progress);
  parallel_for(pending.size(), options.jobs, [&](std::size_t i) {
    const SweepPoint& p = *pending[i];
    nlohmann::json line = {{"point", p.index}, {"overrides", overrides_json(p)}};
    try {
      line["runs"] = at(p, [&] {
        // Moved out, so each scenario's memory goes as its point finishes.
        Scenario s = loaded.empty() ? base.load(p) : *std::exchange(loaded[i], std::nullopt);
        // run_scenario echoes the resolved scenario, which a sweep line leaves out: converting it
        // to JSON for nothing was 8% of a small point's time.
        s.resolved.reset();
        return run_scenario(s)["runs"];
      });
    } catch (const InputError& e) {  // e.g. a layout that outgrows memory only once routed
      line["error"] = nlohmann::json::array();
      for (const auto& d : e.diagnostics()) line["error"].push_back(d.to_string());
    } catch (const TimeRangeError& e) {  // durations past simulated time's range: the point's inputs
      line["error"] = nlohmann::json::array({spec.file + ": error: " + e.what() + " (sweep point " +
                                             std::to_string(p.index) + ")"});
    }
    const std::string text = line.dump() + "\n";
    const std::lock_guard lock(out_mutex);
    if (!out.write(text.data(), static_cast<std::streamsize>(text.size())).flush())
      throw std::runtime_error("cannot write " + jsonl.string());
    log.lines.push_back(line);
    bar.advance();
  });
  bar.finish();

  SweepOutcome outcome;
  outcome.points = in_shard;
  outcome.already_done = in_shard - pending.size();
  outcome.ran = pending.size();
  std::stable_sort(log.lines.begin(), log.lines.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["point"].get<std::size_t>() < b["point"].get<std::size_t>();
  });
  std::size_t shown = 0;
  for (const auto& line : log.lines) {
    if (!line.contains("error")) continue;
    ++outcome.failed;
    for (const auto& d : line["error"])
      if (shown < kMaxReportedPoints) std::cerr << d.get<std::string>() << "\n";
    ++shown;
  }
  write_atomically(dir / "results.csv", sweep_csv(spec, std::move(log.lines), &outcome.csv_rows));
  return outcome;
}

namespace {

constexpr const char* kSweepHelp = R"(Points: the cartesian product of the --grid lists (the first --grid outermost, the last
varying fastest); the --zip lists, all of one length, advance together as one more, innermost,
dimension. A value is YAML text (`[a,b]` stays one value) or a range start:stop:step, stop
included (1.0:4.0:0.2 is 16 values). --set applies to every point, before its own overrides.

Every point is loaded and checked before any runs: a bad key or value exits 2 with
FILE:LINE:COL (or the --grid/--zip/--set naming it) and the point, and writes nothing.

DIR/sweep.json     the sweep's definition (file, its hash, axes, sets)
DIR/results.jsonl  one line per finished point, in completion order:
                   {"point": i, "overrides": {key: value}, "runs": [{policy, label, predictor, metrics}]}
                   or {"point": i, "overrides": {...}, "error": ["FILE:LINE:COL: error: ..."]}
DIR/results.csv    one row per (point, run), sorted by point, byte-identical whatever --jobs:
                   point, the swept keys, policy, label, predictor[, predictor_label][, error],
                   then every scalar metric flattened with dots (bytes.intra_node, ...) in a
                   stable order (first seen over the sorted points; a result's keys are
                   alphabetical); arrays (per_gpu, per_batch, per_gpu_ms) are left out.

Resume: run the same command again; points already in results.jsonl are skipped (an interrupted
last line is rewritten). A different definition in DIR is refused. Traces are never written.
Shards: --shard K/N runs only the points whose index mod N is K-1, into its own DIR (resumable
as above). On N machines (GNU parallel, a Slurm job array: see docs/guide.md), then
`moesim sweep merge DIR1 ... DIRN --out DIR` writes the folder the whole sweep on one machine
would have: the same sweep.json and results.csv byte for byte, results.jsonl in point order.
Exit codes: 0 success, 2 bad input or a point that failed while running (recorded with its
error), 1 internal error.)";

}  // namespace

SweepCommand::SweepCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("sweep", "run a scenario at every point of a parameter grid; write DIR/results.csv");
  cmd_->add_option("file", file_, "scenario YAML (required unless `merge`)");
  cmd_->add_option("--grid", grids_, "key.path=v1,v2,... (or start:stop:step): one dimension (repeatable)")
      ->allow_extra_args(false);
  cmd_->add_option("--zip", zips_, "key.path=v1,v2,...: advances with the other --zip lists (repeatable)")
      ->allow_extra_args(false);
  cmd_->add_option("--set", sets_, "override a scenario key at every point: key.path=value (repeatable)")
      ->allow_extra_args(false);
  cmd_->add_option("--out", out_, "output directory (created; an existing sweep there resumes); required");
  cmd_->add_option("--jobs", jobs_, "points run in parallel (default: hardware concurrency)")
      ->check(CLI::PositiveNumber);
  cmd_->add_option("--shard", shard_, "K/N: run only shard K of N (points i with i mod N = K-1)");
  cmd_->footer(kSweepHelp);
  cmd_->require_subcommand(0, 1);
  merge_ = cmd_->add_subcommand("merge", "join the --shard folders of one sweep into one folder");
  merge_->add_option("dirs", merge_dirs_, "shard folders (DIR of each `moesim sweep --shard K/N --out DIR`)")->required();
  merge_->add_option("--out", merge_out_, "folder to write sweep.json, results.jsonl, results.csv")->required();
}

bool SweepCommand::parsed() const { return cmd_->parsed(); }

int SweepCommand::run() const {
  if (merge_->parsed()) {
    const SweepOutcome o = merge_sweeps(merge_dirs_, merge_out_);
    std::cout << "sweep merge: " << merge_dirs_.size() << " folders, " << o.points << " points";
    if (o.failed) std::cout << "; " << o.failed << " failed (their error is in results.csv)";
    std::cout << "\nwrote " << (fs::path(merge_out_) / "results.csv").string() << " (" << o.csv_rows << " rows)\n";
    return o.failed ? 2 : 0;
  }
  if (file_.empty() || out_.empty())
    throw InputError(SourceLocation{"moesim sweep", 0, 0},
                     "a scenario FILE and --out DIR are required (moesim sweep FILE --grid ... --out DIR)");
  SweepSpec spec{file_, {}, {}, sets_};
  for (const auto& g : grids_) spec.grids.push_back(parse_sweep_axis("--grid", g));
  for (const auto& z : zips_) spec.zips.push_back(parse_sweep_axis("--zip", z));
  const unsigned jobs = jobs_ ? jobs_ : std::max(1u, std::thread::hardware_concurrency());
  SweepOptions options;
  options.out_dir = out_;
  options.jobs = jobs;
  options.progress = isatty(STDERR_FILENO) == 1;
  if (!shard_.empty()) options.shard = parse_sweep_shard(shard_);
  const SweepOutcome o = run_sweep(spec, options);
  std::cout << "sweep: " << (options.shard.count > 1 ? "shard " + options.shard.text() + ": " : "") << o.points << " points: ran " << o.ran << ", skipped " << o.already_done
            << " already in results.jsonl";
  if (o.failed) std::cout << "; " << o.failed << " failed (their error is in results.csv)";
  std::cout << "\nwrote " << (fs::path(out_) / "results.csv").string() << " (" << o.csv_rows << " rows)\n";
  return o.failed ? 2 : 0;
}

}  // namespace moesim
