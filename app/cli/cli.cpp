#include "app/cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "app/cli/compare.hpp"
#include "app/run/progress_bar.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "app/run/staged_output.hpp"
#include "app/cli/summary.hpp"
#include "core/diagnostics.hpp"
#include "core/version.hpp"

namespace moesim {

namespace fs = std::filesystem;

/// Rejects NaN, infinities (which CLI11's range checks let through) and anything but a decimal
/// number (std::stod and CLI11 read 0x10 as 16).
const CLI::Validator finite_number(
    [](std::string& v) {
      double x = 0.0;
      const char* first = v.data() + (!v.empty() && v.front() == '+' ? 1 : 0);
      const auto [end, ec] = std::from_chars(first, v.data() + v.size(), x, std::chars_format::general);
      if (ec != std::errc() || end != v.data() + v.size()) return "not a decimal number: " + v;
      return std::isfinite(x) ? std::string() : "must be a finite number, got " + v;
    },
    "FINITE");

namespace {

/// A serving run's progress on stderr (simulated time, requests finished), redrawn at most every
/// `serving.progress_interval_s` of wall time; only when stderr is a terminal and the run is not quiet.
ServingProgress serving_progress_line(bool enabled, double interval_s, std::shared_ptr<bool> drawn) {
  if (!enabled) return {};
  using Clock = std::chrono::steady_clock;
  auto last = std::make_shared<Clock::time_point>(Clock::now());
  return [last, drawn, interval_s](double sim_s, std::int64_t finished, std::int64_t total) {
    const auto now = Clock::now();
    if (finished != total && now - *last < std::chrono::duration<double>(interval_s)) return;
    *last = now;
    *drawn = true;
    std::fprintf(stderr, "\rserving: simulated %.2f s, %lld/%lld requests finished   ", sim_s, static_cast<long long>(finished),
                 static_cast<long long>(total));
    std::fflush(stderr);
  };
}

void print_warnings(const Scenario& s) {
  for (const Diagnostic& w : s.warnings) std::cerr << w.to_string() << "\n";
}

int cmd_run(const std::string& file, const std::vector<std::string>& sets, const std::string& out_opt, bool quiet,
            unsigned jobs) {
  const Scenario s = load_scenario(file, sets);
  print_warnings(s);
  check_scenario_fits(s);
  const fs::path out = out_opt.empty() ? fs::path("results") / s.name : fs::path(out_opt);
  // Traces, requests.csv, result.json and the resolved scenario are staged and moved into `out`
  // together once every run has succeeded: a failure leaves `out` as it was.
  StagedOutput staged(out);
  const bool show_progress = !quiet && isatty(STDERR_FILENO) == 1;
  auto drawn = std::make_shared<bool>(false);
  // Serving runs report simulated time and requests; prefill runs count batches over all runs.
  const bool serving = s.workload_kind == WorkloadKind::kServing;
  ProgressBar batches("run", "batches", s.policies.size() * s.predictors.size() * static_cast<std::size_t>(s.workload.batches),
                      0, show_progress && !serving);
  const nlohmann::json result =
      run_scenario(s, staged.dir().string(), serving_progress_line(show_progress && serving, s.serving.progress_interval_s, drawn),
                   jobs ? jobs : std::max(1u, std::thread::hardware_concurrency()), [&batches] { batches.advance(); });
  batches.finish();
  if (*drawn) std::fprintf(stderr, "\n");
  for (const auto& r : result["runs"])
    if (r.contains("warnings"))
      for (const auto& w : r["warnings"])
        std::cerr << file << ": warning: run " << r["label"].get<std::string>() << ": " << w.get<std::string>() << "\n";
  write_atomically(staged.dir() / "result.json", result.dump(2) + "\n");
  YAML::Emitter em;
  em << s.resolved;
  write_atomically(staged.dir() / "scenario.resolved.yaml", std::string(em.c_str()) + "\n");
  staged.commit();
  if (!quiet) {
    print_summary(std::cout, result);
    std::cout << "\nwrote " << (out / "result.json").string() << "\n";
  }
  return 0;
}

int cmd_validate(const std::string& file, const std::vector<std::string>& sets) {
  const Scenario s = load_scenario(file, sets);
  print_warnings(s);
  check_scenario_fits(s);
  std::cout << file << ": ok (" << s.policies.size() << " policies x " << s.predictors.size()
            << " predictors)\n";
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"moesim: discrete-event performance simulator for Mixture-of-Experts inference"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "all subcommands' help");
  app.set_version_flag("--version", std::string("moesim ") + moesim_version() + " (" + moesim_commit() + ")");

  std::string file, out;
  std::vector<std::string> sets;
  bool quiet = false;
  auto* run = app.add_subcommand("run", "simulate a scenario and write DIR/result.json");
  run->add_option("file", file, "scenario YAML")->required();
  run->add_option("--set", sets, "override a scenario key: key.path=value (repeatable)");
  run->add_option("--out", out, "output directory (default results/<scenario name>/)");
  run->add_flag("-q,--quiet", quiet, "do not print the summary table or the progress bar");
  unsigned run_jobs = 0;
  run->add_option("--jobs", run_jobs, "(policy, predictor) runs in parallel (default: hardware concurrency); "
                                     "the output is the same whatever the value")
      ->check(CLI::PositiveNumber);

  auto* validate = app.add_subcommand("validate", "check a scenario; print every problem as file:line:col");
  validate->add_option("file", file, "scenario YAML")->required();
  validate->add_option("--set", sets, "override a scenario key: key.path=value (repeatable)");

  const SweepCommand sweep(app);
  const PlanCommand plan(app);
  const GuidelineCommand guideline(app);

  CompareOptions compare_options;
  auto* compare = app.add_subcommand("compare", "runs of result.json files side by side, with ratios to the first run");
  compare->add_option("results", compare_options.files, "result.json files (or the folders `moesim run` wrote)")
      ->required();
  compare->add_option("--metric", compare_options.metrics,
                      "metric to compare, dotted as in sweep's results.csv (ttft_ms.p99, bytes.inter_node; "
                      "repeatable; default: the latency and throughput metrics present)");
  compare->add_flag("--csv", compare_options.csv, "CSV, one row per run: each metric and its ratio to the first run");

  const ListCommand list(app);
  const CostCommand cost(app);
  const CalibrateCommand calibrate(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help: printed, a success
    // Flag errors read as every other error does.
    std::cerr << "moesim: error: " << e.what() << "\nRun with --help for the options.\n";
    return 2;
  }
  try {
    if (run->parsed()) return cmd_run(file, sets, out, quiet, run_jobs);
    if (validate->parsed()) return cmd_validate(file, sets);
    if (sweep.parsed()) return sweep.run();
    if (plan.parsed()) return plan.run();
    if (guideline.parsed()) return guideline.run();
    if (list.parsed()) return list.run();
    if (compare->parsed()) {
      compare_results(compare_options, std::cout);
      return 0;
    }
    if (cost.parsed()) return cost.run();
    if (calibrate.parsed()) return calibrate.run();
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << d.to_string() << "\n";
    return 2;
  } catch (const fs::filesystem_error& e) {
    std::cerr << "moesim: error: cannot write the output: " << e.code().message() << " [" << e.path1().string()
              << "]\n";
    return 2;
  } catch (const TimeRangeError& e) {
    // Valid-looking numbers whose durations leave simulated time's range (sim/tick.hpp).
    std::cerr << (file.empty() ? std::string("moesim") : file) << ": error: " << e.what()
              << ": an input is too extreme to simulate (a bandwidth or peak near zero, a latency of days, "
                 "a buffer of exabytes)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "moesim: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace moesim
