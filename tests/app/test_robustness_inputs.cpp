// Issue 30's reproducers, classes 1 and 2: YAML aliases that recurse or explode, JSON nested past
// the stack, sweep logs without metrics, integers past the type they are held in or past a
// physical bound, arrival times past simulated time, flag errors, and (class 4) a failed run's
// files. Each ends in a located error and exit 2: never a crash, a hang, an abort, a wrapped value
// run silently, or files left behind.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/diagnostics.hpp"
#include "core/json_input.hpp"
#include "core/yaml_input.hpp"
#include "tests/support/hostile_inputs.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;
constexpr const char* kBase = kHostileBase;
fs::path scratch(const std::string& name) { return scratch_dir("inputs-" + name); }

// `moesim validate` of kBase with one --set: exit 2 and an error saying `says`.
void expect_refused(const std::string& set, const std::string& says) {
  const fs::path dir = scratch("set");
  const auto r = run_cli_captured({"validate", write(dir, "s.yaml", kBase).string(), "--set", set});
  EXPECT_EQ(r.code, 2) << set << "\n" << r.err;
  EXPECT_TRUE(has(r.err, says)) << set << "\n" << r.err;
  EXPECT_FALSE(has(r.err, "internal error")) << r.err;
}

}  // namespace

TEST(YamlInput, RecursiveAliasesAreLocatedErrors) {
  const fs::path dir = scratch("alias");
  const std::string self = std::string(kBase) + "zzz: &z [*z]\n";
  auto r = run_cli_captured({"validate", write(dir, "a.yaml", self).string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "a.yaml:7:10: error: recursive alias")) << r.err;
  std::string nested = kBase;
  nested.replace(nested.find("routing: {kind: uniform}"), 24, "routing: &r {kind: uniform, extra: *r}");
  r = run_cli_captured({"run", write(dir, "b.yaml", nested).string(), "--out", (dir / "out").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "b.yaml:5:")) << r.err;
  EXPECT_TRUE(has(r.err, "recursive alias")) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  // Through --set the same check names the --set.
  expect_refused("workload.routing=&r {kind: uniform, x: *r}", "--set workload.routing=&r");
}

TEST(YamlInput, AliasBombsAreRefusedBeforeTheTreeIsBuilt) {
  // Ten aliases of ten aliases, eight levels: 10^9 nodes once expanded, a few lines written.
  std::string bomb = std::string(kBase) + "unknown_key:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 8; ++i) {
    bomb += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    load_yaml_input(bomb, "bomb.yaml");
    ADD_FAILURE() << "an alias bomb was accepted";
  } catch (const InputError& e) {
    EXPECT_TRUE(has(e.diagnostics().front().to_string(), "bomb.yaml:13:")) << e.what();
    EXPECT_TRUE(has(e.diagnostics().front().message, "past a million nodes")) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Aliases that stay small are YAML as usual.
  const YAML::Node ok = load_yaml_input("a: &x {k: 1}\nb: *x\nc: [*x, *x]\n", "ok.yaml");
  EXPECT_EQ(ok["c"][1]["k"].as<int>(), 1);
}

TEST(JsonInput, NestingPastTheBoundIsAnErrorNotAStackOverflow) {
  const int depth = 200000;
  std::string deep = "{\"runs\": [{\"label\": \"a\", \"metrics\": ";
  for (int i = 0; i < depth; ++i) deep += "{\"a\": ";
  deep += "1";
  deep += std::string(depth, '}');
  deep += "}]}";
  const fs::path dir = scratch("json");
  const fs::path f = write(dir, "deep.json", deep);
  const auto r = run_cli_captured({"compare", f.string(), f.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "deep.json:1:")) << r.err.substr(0, 400);
  EXPECT_TRUE(has(r.err, "nested deeper than 256 levels")) << r.err.substr(0, 400);
  EXPECT_TRUE(parse_json_or_discarded(deep).is_discarded());
  // Brackets inside strings do not count.
  EXPECT_EQ(json_too_deep_at("{\"a\": \"" + std::string(1000, '[') + "\"}"), std::string_view::npos);
}

TEST(SweepLog, ALineWithoutMetricsIsRefusedAndNothingIsWritten) {
  const fs::path dir = scratch("sweep");
  const fs::path file = write(dir, "s.yaml", kBase);
  const std::string out = (dir / "swo").string();
  auto r = run_cli_captured({"sweep", file.string(), "--grid", "workload.arrival.rate_per_s=10,20", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  // The log's runs lose their metrics (or hold a number): a re-run and a merge refuse the line.
  for (const bool as_number : {true, false}) {
    const std::string log = testing_support::slurp(fs::path(out) / "results.jsonl");
    std::string edited;
    for (std::size_t at = 0; at < log.size();) {
      const std::size_t nl = log.find('\n', at);
      nlohmann::json line = nlohmann::json::parse(log.substr(at, nl - at));
      for (auto& run : line["runs"]) {
        if (as_number)
          run["metrics"] = 5;
        else
          run.erase("metrics");
      }
      edited += line.dump() + "\n";
      at = nl + 1;
    }
    std::ofstream(fs::path(out) / "results.jsonl") << edited;
    r = run_cli_captured({"sweep", file.string(), "--grid", "workload.arrival.rate_per_s=10,20", "--out", out});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(has(r.err, "results.jsonl:1:1: error: point 0: a run without a 'metrics' object")) << r.err;
    const fs::path merged = dir / "merged";
    r = run_cli_captured({"sweep", "merge", out, "--out", merged.string()});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_FALSE(fs::exists(merged)) << "a failed merge wrote part of its folder";
  }
}

TEST(IntegerRange, ValuesPastTheirTypeOrAPhysicalBoundAreRefused) {
  expect_refused("model.layers=4294967298", "'layers' must be <= 4096");
  expect_refused("model.layers=10000000", "'layers' must be <= 4096");
  expect_refused("model.experts=4294967304", "'experts' must be <= 65536");
  expect_refused("model.top_k=4294967297", "'top_k' must be <= 1024");
  expect_refused("deployment.prefill_gpus=2147483648", "'prefill_gpus' must be <= 1e+06");
  expect_refused("policy={name: eplb, redundant_experts: 4294967300}", "'redundant_experts' must be <= 65536");
  expect_refused("policy={name: amoe, lookahead_blocks: 2147483647}", "'lookahead_blocks' must be <= 4096");
  expect_refused("policy={name: grace, profile_batches: 100000000}", "'profile_batches' must be <= 10000");
  expect_refused("policy={name: exflow, profile_batches: 100000000}", "'profile_batches' must be <= 10000");
  expect_refused("seed=-5", "'seed' must be >= 0");
  // An integer without a declared bound is bounded by the 32 bits it is held in.
  expect_refused("workload.routing={kind: skewed, hot_experts: 4294967296}", "(the range of the integer it is held in)");
  // An error inside a --set mapping names the --set, not a position in the scenario file.
  expect_refused("policy={name: eplb, redundant_experts: 4294967300}", "--set policy={name: eplb");
}

TEST(ArrivalTimes, PastSimulatedTimeAreInputErrors) {
  for (const char* arrival : {"{process: poisson, rate_per_s: 1e-300}", "{process: constant, rate_per_s: 1e-12}"}) {
    const fs::path dir = scratch("arrival");
    const auto r = run_cli_captured({"run", write(dir, "s.yaml", kBase).string(), "--set",
                                     std::string("workload.arrival=") + arrival, "--out", (dir / "o").string()});
    EXPECT_EQ(r.code, 2) << arrival << "\n" << r.err;
    EXPECT_TRUE(has(r.err, "beyond the simulated time range")) << r.err;
    EXPECT_FALSE(has(r.err, "internal error")) << r.err;
  }
  expect_refused("workload.arrival={process: gamma, rate_per_s: 10, cv: 1e-300}", "'cv' must be >= 0.001");
  expect_refused("workload.arrival={process: gamma, rate_per_s: 10, cv: 1e300}", "'cv' must be <= 1000");
  // A trace row at 1e7 s (past ~53 days).
  const fs::path dir = scratch("trace");
  write(dir, "t.csv", "arrived_at_s,prompt_tokens,output_tokens\n0,64,8\n1e7,64,8\n");
  std::string traced = kBase;
  const std::string lengths = "arrival: {process: poisson, rate_per_s: 50}, prompt_tokens: 64, output_tokens: 8";
  traced.replace(traced.find(lengths), lengths.size(), "arrival: {process: trace, file: t.csv}");
  const std::string counts = "requests: 20, warmup_requests: 2";
  traced.replace(traced.find(counts), counts.size(), "requests: 2");
  const auto r = run_cli_captured({"run", write(dir, "s.yaml", traced).string(), "--out", (dir / "o").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "request 1 would arrive at 10000000")) << r.err;
}

TEST(StagedOutput, AFailedRunLeavesTheOutFolderAsItWas) {
  const fs::path dir = scratch("staged");
  const fs::path file = write(dir, "s.yaml", kBase);
  // result.json is a directory: nothing else (requests.csv, result.json.tmp) is left beside it.
  fs::create_directories(dir / "o" / "result.json");
  auto r = run_cli_captured({"run", file.string(), "-q", "--out", (dir / "o").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "cannot write the output: Is a directory")) << r.err;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir / "o")) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"result.json"});
  // A run that fails once started creates no --out folder, and no staging folder stays behind.
  r = run_cli_captured({"run", file.string(), "-q", "--out", (dir / "fresh").string(), "--set",
                        "workload.arrival={process: constant, rate_per_s: 1e-12}"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_FALSE(fs::exists(dir / "fresh"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".staging"), std::string::npos) << e.path();
  // A run that succeeds writes its files into the folder.
  r = run_cli_captured({"run", file.string(), "-q", "--out", (dir / "fresh").string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "fresh" / "result.json"));
  EXPECT_TRUE(fs::exists(dir / "fresh" / "requests.csv"));
}

TEST(FlagErrors, SayErrorAndRefuseANegativeSeed) {
  auto r = run_cli_captured({"guideline", "--seed", "-5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "moesim: error: --seed")) << r.err;
  r = run_cli_captured({"run", "x.yaml", "--no-such-flag"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "moesim: error: ")) << r.err;
}

}  // namespace moesim
