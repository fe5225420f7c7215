// The serving command line: byte-identical outputs for a seed (run, and sweep whatever --jobs),
// and bad serving input refused by `run` and `validate` alike (exit 2, FILE:LINE:COL, nothing
// written).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

using testing_support::slurp;

// A small colocated serving scenario; `workload` and `serving` replace those sections' bodies.
std::string scenario(const std::string& workload =
                         "{kind: serving, requests: 60, warmup_requests: 10, arrival: {process: poisson, rate_per_s: 50}, "
                         "prompt_tokens: {dist: uniform, min: 32, max: 400}, output_tokens: {dist: uniform, min: 1, max: 40}}",
                     const std::string& serving = "{max_num_seqs: 16, max_batched_tokens: 1024}",
                     const std::string& extra = "") {
  return "name: serving-cli\n"
         "seed: 9\n"
         "model: {preset: mixtral-8x7b, layers: 2}\n"
         "hardware: dgx-a100\n"
         "workload: " + workload + "\n"
         "serving: " + serving + "\n"
         "policy: [static-ep, {name: static-ep, label: rr, placement: round-robin}]\n"
         "predictor: none\n" + extra;
}

class ServingCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moesim-serving-cli-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir / name;
    std::ofstream(p) << text;
    return p.string();
  }

  fs::path dir;
};

}  // namespace

// ---- 6. Determinism -----------------------------------------------------------------------------

TEST_F(ServingCli, SameSeedGivesByteIdenticalResultAndRequestsCsv) {
  const std::string file = write("s.yaml", scenario());
  for (const char* out : {"a", "b"}) {
    const auto r = testing_support::run_cli_captured({"run", file, "--out", (dir / out).string(), "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const std::string result = slurp(dir / "a" / "result.json"), csv = slurp(dir / "a" / "requests.csv");
  ASSERT_FALSE(result.empty());
  EXPECT_EQ(result, slurp(dir / "b" / "result.json"));
  EXPECT_EQ(csv, slurp(dir / "b" / "requests.csv"));
  // One row per request of each run, after the header.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 60);
  const auto j = nlohmann::json::parse(result);
  EXPECT_EQ(j["requests_csv"], "requests.csv");
  EXPECT_EQ(j["runs"][0]["metrics"]["requests_completed"], 50);

  // Another seed draws other requests.
  const auto r = testing_support::run_cli_captured({"run", file, "--set", "seed=10", "--out", (dir / "c").string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(csv, slurp(dir / "c" / "requests.csv"));
}

TEST_F(ServingCli, SweepIsByteIdenticalWhateverTheJobs) {
  const std::string file = write("s.yaml", scenario());
  for (const char* jobs : {"1", "2"}) {
    const auto r = testing_support::run_cli_captured({"sweep", file, "--grid", "workload.arrival.rate_per_s=20,80,200", "--grid",
                                                      "seed=1,2", "--jobs", jobs, "--out", (dir / ("j" + std::string(jobs))).string()});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const std::string a = slurp(dir / "j1" / "results.csv");
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), 1 + 3 * 2 * 2);  // header + points × policies
  EXPECT_NE(a.find("request_rate_per_s"), std::string::npos);
  EXPECT_EQ(a, slurp(dir / "j2" / "results.csv"));
  // And each point matches the same scenario run on its own.
  std::ifstream jsonl(dir / "j2" / "results.jsonl");
  int points = 0;
  for (std::string line; std::getline(jsonl, line);) {
    const auto p = nlohmann::json::parse(line);
    if (p["overrides"]["workload.arrival.rate_per_s"] != "80" || p["overrides"]["seed"] != "2") continue;
    ++points;
    const auto r = testing_support::run_cli_captured({"run", file, "--set", "workload.arrival.rate_per_s=80", "--set", "seed=2",
                                                      "--out", (dir / "single").string(), "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto single = nlohmann::json::parse(slurp(dir / "single" / "result.json"));
    for (std::size_t i = 0; i < 2; ++i) {
      auto m = single["runs"][i]["metrics"], swept = p["runs"][i]["metrics"];
      EXPECT_EQ(m["e2e_ms"], swept["e2e_ms"]);
      EXPECT_EQ(m["request_rate_per_s"], swept["request_rate_per_s"]);
      EXPECT_EQ(m["steps"], swept["steps"]);
    }
  }
  EXPECT_EQ(points, 1);
}

// ---- 8. Bad input ---------------------------------------------------------------------------

TEST_F(ServingCli, BadServingInputExits2LocatedAndWritesNothing) {
  write("missing_column.csv", "arrived_at_s,prompt_tokens\n0.1,100\n0.2,120\n");
  write("unsorted.csv", "arrived_at_s,prompt_tokens,output_tokens\n0.5,100,10\n0.1,120,10\n");
  const std::string ok_wl = "{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, prompt_tokens: 100, "
                            "output_tokens: 10}";
  struct Case {
    std::string name, text, message;
  };
  const std::vector<Case> cases = {
      {"rate_zero",
       scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 0}, prompt_tokens: 100, output_tokens: 10}"),
       "rate_per_s"},
      {"rate_negative",
       scenario("{kind: serving, requests: 20, arrival: {process: constant, rate_per_s: -3}, prompt_tokens: 100, output_tokens: 10}"),
       "rate_per_s"},
      {"zero_output",
       scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, prompt_tokens: 100, output_tokens: 0}"),
       "output_tokens"},
      {"longer_than_context",
       scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, prompt_tokens: 40000, output_tokens: 10}"),
       "context"},
      {"kv_cache_too_small",
       scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, prompt_tokens: 30000, output_tokens: 2000}",
                "{gpu_memory_utilization: 0.03}"),
       "KV cache cannot hold even one request"},
      {"trace_missing_column",
       scenario("{kind: serving, requests: 20, arrival: {process: trace, file: missing_column.csv}}"), "output_tokens"},
      {"trace_unsorted", scenario("{kind: serving, requests: 20, arrival: {process: trace, file: unsorted.csv}}"), "sorted"},
      {"pools_larger_than_cluster", scenario(ok_wl, "{}", "deployment: {prefill_gpus: 6, decode_gpus: 4}\n"), "exceeds"},
      {"tp_not_dividing_heads", scenario(ok_wl, "{}", "deployment: {tensor_parallel: 3}\n"), "attention heads"},
      {"tp_over_cluster", scenario(ok_wl, "{}", "deployment: {tensor_parallel: 16}\n"), "needs more GPUs than the 8"},
      {"tp_times_dp_over_cluster", scenario(ok_wl, "{}", "deployment: {tensor_parallel: 4, data_parallel: 4}\n"),
       "needs more GPUs"},
      {"no_ep_with_ep_policy", scenario(ok_wl, "{}", "deployment: {tensor_parallel: 2, expert_parallel: false}\n"),
       "needs expert parallelism"},
      {"unknown_engine", scenario(ok_wl, "{engine: tensorrt}"), "trtllm"},
      {"unchunked_prompt_over_budget",
       scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, prompt_tokens: 600, output_tokens: 1}",
                "{max_batched_tokens: 512, chunked_prefill: false}"),
       "max_batched_tokens"},
      {"unchunked_recompute_over_budget",
       scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, prompt_tokens: 500, output_tokens: 200}",
                "{max_batched_tokens: 512, chunked_prefill: false, preemption: recompute}"),
       "max_batched_tokens"},
  };
  // Some line reads FILE:LINE:COL: error: ... (no <regex>: GCC 12 warns inside it under ASan).
  const auto located = [](const std::string& err) {
    std::istringstream lines(err);
    for (std::string line; std::getline(lines, line);) {
      const auto at = line.find(": error: ");
      if (at == std::string::npos) continue;
      const std::string where = line.substr(0, at);
      const auto c2 = where.rfind(':');
      if (c2 == std::string::npos || c2 == 0) continue;
      const auto c1 = where.rfind(':', c2 - 1);
      if (c1 == std::string::npos || c1 == 0) continue;
      const std::string l = where.substr(c1 + 1, c2 - c1 - 1), c = where.substr(c2 + 1);
      const auto digits = [](const std::string& x) {
        return !x.empty() && x.find_first_not_of("0123456789") == std::string::npos;
      };
      if (digits(l) && digits(c)) return true;
    }
    return false;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string file = write(c.name + ".yaml", c.text);
    const fs::path out = dir / ("out-" + c.name);
    const auto run = testing_support::run_cli_captured({"run", file, "--out", out.string(), "--quiet"});
    EXPECT_EQ(run.code, 2) << run.err;
    EXPECT_TRUE(located(run.err)) << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(out / "result.json"));
    EXPECT_FALSE(fs::exists(out / "requests.csv"));
    const auto val = testing_support::run_cli_captured({"validate", file});
    EXPECT_EQ(val.code, 2) << val.out;
    EXPECT_EQ(val.err, run.err);
  }
  // The same budget is fine with chunking, with swap (prompts alone are re-prefilled), or under
  // reserve-full admission (nothing is ever preempted, so nothing is re-prefilled).
  for (const std::string& serving :
       {std::string("{max_batched_tokens: 512, chunked_prefill: true}"),
        std::string("{max_batched_tokens: 512, chunked_prefill: false, preemption: swap}"),
        std::string("{max_batched_tokens: 512, chunked_prefill: false, admission: reserve-full}")}) {
    const std::string file = write("fine.yaml", scenario("{kind: serving, requests: 20, arrival: {process: poisson, rate_per_s: 10}, "
                                                         "prompt_tokens: 500, output_tokens: 200}",
                                                         serving));
    const auto val = testing_support::run_cli_captured({"validate", file});
    EXPECT_EQ(val.code, 0) << serving << ": " << val.err;
  }
}

}  // namespace moesim

namespace moesim {

// The Chrome trace of a serving run has a `requests` process beside the GPUs, a lane per request
// with its queued / prefill / decode slices in order, and the steps' tasks on the GPUs' lanes.
TEST_F(ServingCli, TraceHasARequestLaneBesideTheGpus) {
  const std::string file = write("s.yaml", scenario() + "output: {trace: true}\n");
  const auto r = testing_support::run_cli_captured({"run", file, "--out", (dir / "t").string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto trace = nlohmann::json::parse(slurp(dir / "t" / "trace-static-ep.json"));
  int requests_pid = -1;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "requests") requests_pid = e["pid"];
  ASSERT_EQ(requests_pid, 8);  // after GPUs 0..7
  std::map<std::int64_t, std::vector<std::pair<std::string, double>>> lanes;
  int gpu_slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["pid"] == requests_pid) lanes[e["tid"].get<std::int64_t>()].push_back({e["name"], e["ts"].get<double>()});
    else ++gpu_slices;
  }
  EXPECT_EQ(lanes.size(), 60u);
  EXPECT_GT(gpu_slices, 0);
  for (const auto& [id, slices] : lanes) {
    ASSERT_GE(slices.size(), 2u) << "request " << id;
    EXPECT_EQ(slices.back().first, "decode");
    for (std::size_t i = 1; i < slices.size(); ++i) EXPECT_LE(slices[i - 1].second, slices[i].second) << "request " << id;
  }
}

}  // namespace moesim
