// Issue 17's reproducers: extreme but well-typed numbers, NaN and unwritable outputs end in a
// located input error and exit 2: never an abort, a hang, a wrong answer or an internal error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli.hpp"
#include "sim/simulator.hpp"
#include "sim/tick.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code;
  std::string err;
};

Outcome cli(std::vector<std::string> args) {
  const auto r = testing_support::run_cli_captured(std::move(args));
  return {r.code, r.err};
}

std::string scenario_file() {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/scenarios/quickstart.yaml";
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("moesim-robust-" + name);
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST(TickRange, ConversionsAndSchedulingRefuseTimesPastTheLimit) {
  EXPECT_EQ(seconds_to_ticks(1.0), kPsPerS);
  EXPECT_EQ(seconds_to_ticks(-3.0), 0);
  EXPECT_THROW(seconds_to_ticks(1e10), TimeRangeError);  // ~317 years
  EXPECT_THROW(seconds_to_ticks(std::nan("")), TimeRangeError);
  EXPECT_THROW(checked_add(kTickLimit - 5, 6), TimeRangeError);
  EXPECT_EQ(checked_add(kTickLimit - 5, 5), kTickLimit);
  Simulator sim;
  sim.at(kTickLimit - 1, [] {});
  sim.run();
  EXPECT_THROW(sim.after(2, [] {}), TimeRangeError);
}

TEST(Robustness, CostWithNanInfOrAnExabyteIsExit2) {
  for (const char* bytes : {"nan", "inf", "-1", "1e20"}) {
    const Outcome o = cli({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", bytes});
    EXPECT_EQ(o.code, 2) << bytes << ": " << o.err;
    EXPECT_EQ(o.err.find("internal error"), std::string::npos) << o.err;
  }
  EXPECT_NE(cli({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "1e20"}).err.find("too extreme"),
            std::string::npos);
}

TEST(Robustness, ExtremeHardwareNumbersAreLocatedErrorsInValidateAndRun) {
  const struct {
    const char* set;
    const char* says;
  } cases[] = {
      {"hardware.nvlink_bandwidth_GBps=1e-15", "'nvlink_bandwidth_GBps' must be 0 (no such link) or at least 0.001"},
      {"hardware.nic_bandwidth_Gbps=1e-15", "'nic_bandwidth_Gbps' must be 0 (no such link) or at least 0.008"},
      {"hardware.gpu.fp16_TFLOPS=1e-12", "'fp16_TFLOPS' must be 0 (unsupported) or at least 0.01"},
      {"hardware.collective_launch_us=1e18", "'collective_launch_us' must be <= 1e+06"},
      {"hardware.gpu.kernel_launch_us=1e18", "'kernel_launch_us' must be <= 1e+06"},
      {"hardware.flow_completion_window_us=1e18", "'flow_completion_window_us' must be <= 1e+06"},
      {"hardware.flow_completion_window_us=-1", "'flow_completion_window_us' must be >= 0"},
      {"hardware.all_to_all_model=pairs", "closed-form"},
      {"hardware.nodes=1000000", "'nodes' must be <= 16384"},
      {"hardware={preset: dgx-a100, nodes: 4096}", "moesim simulates at most 16384"},
      {"hardware.nvlink_bandwidth_GBps=.nan", "finite"},
      {"hardware.nic_bandwidth_Gbps=.inf", "finite"},
      {"workload.batches=10000000", "'batches' must be <= 1e+06"},
  };
  for (const auto& c : cases)
    for (const char* cmd : {"validate", "run"}) {
      std::vector<std::string> args{cmd, scenario_file(), "--set", c.set};
      if (std::string(cmd) == "run") args.insert(args.end(), {"-q", "--out", scratch("extreme").string()});
      const Outcome o = cli(args);
      EXPECT_EQ(o.code, 2) << cmd << " " << c.set << ": " << o.err;
      EXPECT_NE(o.err.find(c.says), std::string::npos) << cmd << " " << c.set << ": " << o.err;
    }
}

// Workloads whose size alone would exhaust memory are refused by `validate`, before any run.
TEST(Robustness, ServingWorkloadsBeyondTheStatedLimitAreRefused) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::string file = std::string(root ? root : ".") + "/scenarios/serving/mixtral-dgx-a100.yaml";
  const Outcome o = cli({"validate", file, "--set", "workload.requests=1000000000"});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--set workload.requests=1000000000: error: 'requests' must be <= 1e+07"), std::string::npos) << o.err;
}

TEST(Robustness, UnwritableOutIsExit2WithTheReason) {
  const fs::path file = scratch("file");
  std::ofstream(file) << "not a directory\n";
  const Outcome o = cli({"run", scenario_file(), "-q", "--out", file.string()});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find("cannot write the output: Not a directory"), std::string::npos) << o.err;
  fs::remove_all(file);
}

TEST(Robustness, UnsupportedDtypeIsAnErrorForCostAndAWarningForAScenario) {
  const Outcome o = cli({"cost", "gemm", "--gpu", "A100-SXM4-80GB", "--m", "64", "--n", "64", "--k", "64", "--dtype", "fp8"});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--dtype: error: A100-SXM4-80GB has no fp8 tensor cores"), std::string::npos) << o.err;
  const Outcome v = cli({"validate", scenario_file(), "--set", "model.dtype=fp8"});
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.err.find("warning: model dtype fp8 has no tensor cores on V100-SXM2-32GB"), std::string::npos) << v.err;
}

TEST(Robustness, EplbDefaultWorksWhenGpusOutnumberExperts) {
  const fs::path d = scratch("eplb");
  fs::create_directories(d);
  std::ofstream(d / "s.yaml") << "model: {preset: switch-base-8, layers: 2}\nhardware: {preset: dgx-a100, nodes: 2}\n"
                                 "workload: {batch_size: 16, seq_len: 32, batches: 1}\npolicy: [eplb]\n";
  const Outcome o = cli({"run", (d / "s.yaml").string(), "-q", "--out", (d / "out").string()});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err.find("warning"), std::string::npos) << o.err;  // eplb replicates onto every GPU
  // One copy per expert leaves half the GPUs without one: legal, said aloud.
  const Outcome w = cli({"validate", (d / "s.yaml").string(), "--set", "policy=static-ep"});
  EXPECT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.err.find("warning: static-ep: 8 of the 16 GPUs hold no expert"), std::string::npos) << w.err;
  fs::remove_all(d);
}

// Section 2: inputs that used to be accepted with an answer nobody asked for.
TEST(Robustness, NothingAcceptedSilently) {
  const fs::path d = scratch("silent");
  fs::create_directories(d);
  const std::string base = "name: s\nmodel: switch-base-8\nhardware: dgx-a100\n";
  const auto validate = [&](const std::string& text, std::vector<std::string> extra = {}) {
    std::ofstream(d / "s.yaml") << text;
    std::vector<std::string> args{"validate", (d / "s.yaml").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args);
  };
  Outcome o = validate(base + "seed: 1\nseed: 2\n");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("s.yaml:5:1: error: duplicate key 'seed' (first at line 4)"), std::string::npos) << o.err;
  o = validate(base + "---\nname: t\n");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("s.yaml:4:1: error: a second YAML document"), std::string::npos) << o.err;
  o = validate(base + "seed: ~\n");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("s.yaml:4:7: error: 'seed' has no value"), std::string::npos) << o.err;
  o = validate(base, {"--set", "seed="});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--set seed=: error: no value"), std::string::npos) << o.err;
  o = validate(base, {"--set", "hardware.nosuch=3"});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--set hardware.nosuch=3: error: unknown option 'nosuch'"), std::string::npos) << o.err;
  o = validate(base);  // no workload: legal, the defaults apply, said aloud
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("warning: no 'workload' section"), std::string::npos) << o.err;
  o = cli({"validate", d.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("is a directory"), std::string::npos) << o.err;
  fs::remove_all(d);
}

TEST(Robustness, RunHeaderNamesTheClusterSize) {
  const fs::path d = scratch("header");
  const auto one = testing_support::run_cli_captured({"run", scenario_file(), "--out", d.string()});
  EXPECT_NE(one.out.find("on dgx1-v100 (8 GPUs),"), std::string::npos) << one.out;
  const auto two = testing_support::run_cli_captured(
      {"run", scenario_file(), "--set", "hardware={preset: dgx1-v100, nodes: 2}", "--set", "model.layers=2", "--out", d.string()});
  EXPECT_NE(two.out.find("(2 nodes x 8 GPUs),"), std::string::npos) << two.out << two.err;
  fs::remove_all(d);
}

TEST(Robustness, VersionFlagAndResultRecordTheBuild) {
  const auto r = testing_support::run_cli_captured({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("moesim 0.", 0), 0u) << r.out;
  const fs::path d = scratch("version");
  ASSERT_EQ(cli({"run", scenario_file(), "-q", "--out", d.string()}).code, 0);
  std::ifstream in(d / "result.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_FALSE(j["moesim"]["version"].get<std::string>().empty());
  EXPECT_FALSE(j["moesim"]["commit"].get<std::string>().empty());
  fs::remove_all(d);
}

}  // namespace moesim
