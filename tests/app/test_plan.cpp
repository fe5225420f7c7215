// `moesim plan`: the search space, its option parsing, and the command end to end on a small
// Mixtral (2 layers) on up to 4 A100s: pruned candidates really do not fit, the files are the same
// whatever --jobs, best.yaml reruns to its row, and bad input exits 2 with a located error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/plan/plan.hpp"
#include "core/diagnostics.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;
using testing_support::run_cli_captured;
using testing_support::slurp;

TEST(PlanCandidates, CoverTheSpaceOnceWithTheScenarioFirst) {
  PlanSpec spec;
  const std::vector<PlanCandidate> c = plan_candidates(spec, 8, 8, 32, 256, 8192);
  ASSERT_FALSE(c.empty());
  EXPECT_TRUE(c[0].scenario);
  std::set<std::string> labels;
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].index, i);
    EXPECT_TRUE(labels.insert(c[i].label()).second) << "twice: " << c[i].label();
    if (c[i].scenario) continue;
    if (c[i].disaggregated) {
      EXPECT_EQ(c[i].prefill.gpus() + c[i].decode.gpus(), c[i].gpus) << c[i].label();
    } else {
      EXPECT_EQ(c[i].colocated.gpus(), c[i].gpus) << c[i].label();
      EXPECT_EQ(c[i].policy == "tp-experts", !c[i].colocated.expert_parallel) << c[i].label();
    }
    // A group's all-reduces stay inside a node, and every GPU runs the same heads.
    EXPECT_EQ(8 % c[i].colocated.tensor_parallel, 0);
    EXPECT_EQ(32 % c[i].colocated.tensor_parallel, 0);
  }
  // 1, 2, 4, 8 GPUs; on 8: TP 1, 2, 4, 8, each with EP (static-ep, eplb) and TP-MoE.
  std::size_t eight = 0;
  for (const PlanCandidate& x : c) eight += !x.scenario && !x.disaggregated && x.gpus == 8;
  EXPECT_EQ(eight, 4u * 3u);
}

TEST(PlanCandidates, DisaggregationAndListsMultiply) {
  PlanSpec spec;
  spec.disaggregation = "off";
  const std::size_t colocated = plan_candidates(spec, 4, 8, 32, 64, 2048).size() - 1;
  spec.max_num_seqs = {32, 64};
  spec.two_batch_overlap = {false, true};
  EXPECT_EQ(plan_candidates(spec, 4, 8, 32, 64, 2048).size() - 1, 4 * colocated);
  spec = PlanSpec{};
  spec.disaggregation = "only";
  for (const PlanCandidate& x : plan_candidates(spec, 4, 8, 32, 64, 2048)) EXPECT_TRUE(x.scenario || x.disaggregated);
  // Beyond a node: whole nodes, powers of two, and the budget itself.
  spec.disaggregation = "off";
  std::set<int> sizes;
  for (const PlanCandidate& x : plan_candidates(spec, 24, 8, 128, 64, 2048)) sizes.insert(x.gpus);
  EXPECT_EQ(sizes, (std::set<int>{0, 1, 2, 4, 8, 16, 24}));
}

TEST(PlanOptions, ObjectivesAndSlosAreParsedOrRefusedWithAName) {
  EXPECT_EQ(parse_plan_objective("cost"), PlanObjective::kCost);
  try {
    parse_plan_objective("goodput-per-gpus");
    FAIL() << "accepted an unknown objective";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'goodput-per-gpu'"), std::string::npos) << e.what();
  }
  PlanSpec spec;
  parse_plan_slo("ttft_ms=500,tpot_ms=40", spec);
  EXPECT_EQ(spec.slo_ttft_ms, 500.0);
  EXPECT_EQ(spec.slo_tpot_ms, 40.0);
  for (const char* bad : {"ttft=5", "ttft_ms=", "ttft_ms=-1", "tpot_ms=1e400", "ttft_ms=5x", ""})
    EXPECT_THROW(parse_plan_slo(bad, spec), InputError) << bad;
}

// A small serving scenario: Mixtral with 2 layers on a DGX A100, Poisson arrivals.
class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moesim-plan-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    scenario = (dir / "s.yaml").string();
    std::ofstream(scenario) << "name: plan\nseed: 4\nmodel: {preset: mixtral-8x7b, layers: 2}\nhardware: dgx-a100\n"
                               "workload: {kind: serving, requests: 60, warmup_requests: 10, arrival: {process: poisson, "
                               "rate_per_s: 40}, prompt_tokens: {dist: uniform, min: 32, max: 400}, output_tokens: "
                               "{dist: uniform, min: 1, max: 40}, routing: {kind: zipf, s: 0.8}}\n"
                               "serving: {max_num_seqs: 16, max_batched_tokens: 1024, slo: {ttft_ms: 200, tpot_ms: 30}}\n"
                               "policy: static-ep\n";
  }
  void TearDown() override { fs::remove_all(dir); }
  testing_support::CliResult plan(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"plan", scenario, "--max-gpus", "2", "--finalists", "2", "-q", "--out", (dir / out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli_captured(args);
  }
  fs::path dir;
  std::string scenario;
};

TEST_F(PlanCli, SameFilesWhateverJobsAndBestReruns) {
  const auto one = plan("j1", {"--jobs", "1", "--set", "hardware.gpu.memory_GB=40"});
  ASSERT_EQ(one.code, 0) << one.err;
  const auto two = plan("j2", {"--jobs", "2", "--set", "hardware.gpu.memory_GB=40"});
  ASSERT_EQ(two.code, 0) << two.err;
  for (const char* f : {"plan.csv", "best.yaml", "engines.txt", "plan.txt"})
    EXPECT_EQ(slurp(dir / "j1" / f), slurp(dir / "j2" / f)) << f;
  // The winner's row and its rerun: goodput = arrival rate x SLO attainment, within 2%.
  std::istringstream csv(slurp(dir / "j1" / "plan.csv"));
  std::string header, line;
  std::getline(csv, header);
  double goodput = -1.0;
  int gpus = 0, pruned_memory = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    if (f[1] == "1") {
      gpus = std::stoi(f[4]);
      goodput = std::stod(f[22]) * gpus;
    }
    // Mixtral's 2 layers of experts do not fit one 40 GB GPU with its KV cache... only in pieces.
    pruned_memory += f[3] == "pruned-memory";
  }
  ASSERT_GT(goodput, 0.0) << slurp(dir / "j1" / "plan.csv");
  const auto rerun = run_cli_captured({"run", (dir / "j1" / "best.yaml").string(), "-q", "--out", (dir / "rerun").string()});
  ASSERT_EQ(rerun.code, 0) << rerun.err;
  const auto m = nlohmann::json::parse(slurp(dir / "rerun" / "result.json"))["runs"][0]["metrics"];
  const double again = m["offered_rate_per_s"].get<double>() * m["slo_attainment"].get<double>();
  EXPECT_NEAR(again, goodput, 0.02 * goodput);
  EXPECT_GE(m["slo_attainment"].get<double>(), 0.9);
  (void)pruned_memory;

  // The same plan in two shards, merged: the files one machine wrote, byte for byte.
  for (const char* k : {"1/2", "2/2"}) {
    const auto shard = plan(std::string("shard") + k[0], {"--jobs", "2", "--set", "hardware.gpu.memory_GB=40", "--shard", k});
    ASSERT_EQ(shard.code, 0) << shard.err;
  }
  const auto merged = run_cli_captured({"plan", "merge", (dir / "shard1").string(), (dir / "shard2").string(), "--out",
                                        (dir / "merged").string(), "--jobs", "2"});
  ASSERT_EQ(merged.code, 0) << merged.err;
  for (const char* f : {"plan.csv", "best.yaml", "engines.txt", "plan.txt"})
    EXPECT_EQ(slurp(dir / "j1" / f), slurp(dir / "merged" / f)) << f;
  // A shard missing, or given twice, is refused.
  const auto missing = run_cli_captured({"plan", "merge", (dir / "shard1").string(), "--out", (dir / "m2").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("missing shards: 2/2"), std::string::npos) << missing.err;
  const auto twice = run_cli_captured({"plan", "merge", (dir / "shard1").string(), (dir / "shard1").string(), "--out",
                                       (dir / "m3").string()});
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.err.find("given twice"), std::string::npos) << twice.err;
}

TEST_F(PlanCli, PrunedCandidatesReallyDoNotFit) {
  // 4.2 GB GPUs: two of them hold Mixtral's two layers with the KV cache the longest request needs,
  // one does not. Every one-GPU candidate must be pruned, and the validator must agree.
  const auto r = plan("small", {"--set", "hardware.gpu.memory_GB=4.2", "--disaggregation", "off"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream csv(slurp(dir / "small" / "plan.csv"));
  std::string line;
  std::getline(csv, line);
  int checked = 0;
  while (std::getline(csv, line)) {
    if (line.find(",pruned-memory,") == std::string::npos || line.find(",1 GPU ") == std::string::npos) continue;
    // The one-GPU layout, validated by hand with the overrides the plan gives it.
    const auto v = run_cli_captured({"validate", scenario, "--set", "hardware.gpu.memory_GB=4.2", "--set",
                                     "hardware.gpus_per_node=1", "--set", "hardware.gpus_per_pcie_switch=1", "--set",
                                     "hardware.sockets=1"});
    EXPECT_EQ(v.code, 2) << v.out;
    EXPECT_NE(v.err.find("error:"), std::string::npos);
    ++checked;
  }
  EXPECT_GT(checked, 0) << slurp(dir / "small" / "plan.csv");
}

TEST_F(PlanCli, FindsTheOnlyTensorParallelSizeThatFits) {
  // Two 4 GB GPUs: with attention split over both (TP 2) the weights, activations and the longest
  // request's KV blocks fit; with attention replicated (TP 1) they do not (the validator is the
  // judge: 3.8 GB fits neither, 4.2 GB both). The scenario's own layout is attention DP over the 2.
  const std::vector<std::string> sets = {"--set", "hardware.gpus_per_node=2", "--set", "hardware.gpus_per_pcie_switch=2",
                                         "--set", "hardware.sockets=1", "--set", "hardware.gpu.memory_GB=4.0",
                                         "--disaggregation", "off", "--gpus-per-instance", "2"};
  const auto r = plan("tp", sets);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream csv(slurp(dir / "tp" / "plan.csv"));
  std::string line;
  std::getline(csv, line);
  int winners = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    const bool tp1 = f[0] == "0" || f[6] == "1";
    if (tp1) {
      EXPECT_EQ(f[3], "pruned-memory") << line;
    }
    if (f[1] == "1") {
      ++winners;
      EXPECT_EQ(f[6], "2") << line;
    }
  }
  EXPECT_EQ(winners, 1) << slurp(dir / "tp" / "plan.csv");
}

TEST_F(PlanCli, NoDeploymentMeetingTheSloExitsZeroWithTheClosest) {
  const auto r = plan("none", {"--slo", "ttft_ms=0.001,tpot_ms=0.001", "--gpus-per-instance", "2", "--disaggregation", "off"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no deployment meets the SLO"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "none" / "best.yaml"));
  EXPECT_TRUE(fs::exists(dir / "none" / "plan.csv"));
}

TEST_F(PlanCli, BadInputExits2Located) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--objective", "goodput"}, "--objective goodput: error: unknown objective"},
      {{"--objective", "cost"}, "needs --gpu-hour-cost"},
      {{"--slo", "ttft=3"}, "--slo ttft=3: error"},
      {{"--percentile", "0"}, "--percentile 0: error"},
      {{"--policies", "eplbb"}, "did you mean 'eplb'"},
      {{"--max-num-seqs", "0"}, "--max-num-seqs 0: error"},
      {{"--set", "hardware.gpu.memory_GB=0.5"}, "--max-gpus 2: error: no deployment of at most 2 GPUs holds"},
  };
  for (const Case& c : cases) {
    const auto r = plan("bad", c.args);
    EXPECT_EQ(r.code, 2) << c.message << "\n" << r.out;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "bad" / "plan.csv")) << c.message;
  }
}

}  // namespace
}  // namespace moesim
