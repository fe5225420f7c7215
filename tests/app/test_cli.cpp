// The command line contract: exit codes, no partial results, byte-identical output, traces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli.hpp"
#include "sim/chrome_trace.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

std::string last_out, last_err;

int cli(std::vector<std::string> args) {
  const auto r = testing_support::run_cli_captured(std::move(args));
  last_out = r.out;
  last_err = r.err;
  return r.code;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moesim-cli-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    scenario = (dir / "s.yaml").string();
    std::ofstream(scenario) << "name: cli\nseed: 7\nmodel: {preset: switch-base-8, layers: 4}\nhardware: hgx-a100-4gpu-nvlink\n"
                               "workload: {batch_size: 4, seq_len: 32, batches: 2, routing: {kind: zipf, s: 1.2}}\n"
                               "policy: [static-ep, {name: static-ep, label: rr, placement: round-robin}]\n"
                               "output: {trace: true}\n";
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
  std::string scenario;
};

}  // namespace

TEST_F(Cli, RunWritesResultResolvedScenarioAndTraces) {
  ASSERT_EQ(cli({"run", scenario, "--out", (dir / "a").string()}), 0) << last_err;
  EXPECT_NE(last_out.find("rr"), std::string::npos);
  const auto result = nlohmann::json::parse(slurp(dir / "a" / "result.json"));
  ASSERT_EQ(result["runs"].size(), 2u);
  EXPECT_EQ(result["scenario"]["model"]["layers"], 4);
  EXPECT_TRUE(fs::exists(dir / "a" / "scenario.resolved.yaml"));
  // One process per GPU, with compute and network lanes populated (every lane, with copies and
  // delays: test_gpu_activity.cpp).
  const auto trace = nlohmann::json::parse(slurp(dir / "a" / "trace-rr.json"));
  int processes = 0, compute = 0, network = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "X" && e["tid"] == ChromeTrace::thread_id(GpuActivity::kCompute, 0)) ++compute;
    if (e["ph"] == "X" && e["tid"] == ChromeTrace::thread_id(GpuActivity::kSend, 0)) ++network;
  }
  EXPECT_EQ(processes, 4);
  EXPECT_GT(compute, 0);
  EXPECT_GT(network, 0);
}

// With several predictors, each run's trace is named by policy and predictor label, and a
// predictor's overhead shows as "predict" delays on every GPU before the MoE layers.
TEST_F(Cli, TracesAreNamedByPredictorLabelAndShowTheOverhead) {
  ASSERT_EQ(cli({"run", scenario, "--out", (dir / "p").string(), "-q", "--set",
                 "predictor=[none, {name: token-to-expert, label: t2e, overhead_c0_ms: 0.25, overhead_c1: 0}]"}),
            0)
      << last_err;
  const auto result = nlohmann::json::parse(slurp(dir / "p" / "result.json"));
  ASSERT_EQ(result["runs"].size(), 4u);
  EXPECT_EQ(result["runs"][3]["trace"], "trace-rr-t2e.json");
  auto predict_events = [&](const char* file) {
    int n = 0;
    const auto trace = nlohmann::json::parse(slurp(dir / "p" / file));
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["cat"] == "predict") ++n;
    return n;
  };
  EXPECT_EQ(predict_events("trace-rr-none.json"), 0);
  // switch-base-8 with 4 layers has 2 MoE layers; 2 batches; 4 GPUs.
  EXPECT_EQ(predict_events("trace-rr-t2e.json"), 2 * 2 * 4);
}

TEST_F(Cli, SameScenarioGivesByteIdenticalResult) {
  ASSERT_EQ(cli({"run", scenario, "--out", (dir / "a").string(), "-q"}), 0);
  ASSERT_EQ(cli({"run", scenario, "--out", (dir / "b").string(), "-q"}), 0);
  EXPECT_EQ(slurp(dir / "a" / "result.json"), slurp(dir / "b" / "result.json"));
  ASSERT_EQ(cli({"run", scenario, "--out", (dir / "c").string(), "-q", "--set", "seed=8"}), 0);
  EXPECT_NE(slurp(dir / "a" / "result.json"), slurp(dir / "c" / "result.json"));
}

TEST_F(Cli, BadInputExitsTwoWithoutPartialResult) {
  EXPECT_EQ(cli({"run", scenario, "--out", (dir / "bad").string(), "--set", "model.top_k=99"}), 2);
  EXPECT_NE(last_err.find("error: 'top_k' (99) exceeds the number of experts (8)"), std::string::npos) << last_err;
  EXPECT_FALSE(fs::exists(dir / "bad" / "result.json"));
  EXPECT_EQ(cli({"validate", (dir / "missing.yaml").string()}), 2);
  EXPECT_EQ(cli({"run"}), 2);  // missing FILE
  EXPECT_EQ(cli({"frobnicate"}), 2);
}

TEST_F(Cli, ValidateReportsEveryProblemWithLocation) {
  std::ofstream(scenario) << "name: v\nmodel: mixtral-8x7b\nhardware: {preset: dgx-a100, nvlink_bandwidth_GBps: 0}\n"
                             "workload: {batch_size: 0}\npolicy: {name: static-ep, placement: diagonal}\n";
  EXPECT_EQ(cli({"validate", scenario}), 2);
  EXPECT_NE(last_err.find(":3:"), std::string::npos) << last_err;  // zero bandwidth
  EXPECT_NE(last_err.find(":4:"), std::string::npos) << last_err;  // batch_size 0
  EXPECT_NE(last_err.find(":5:"), std::string::npos) << last_err;  // bad placement
  std::ofstream(scenario) << "name: v\nmodel: mixtral-8x7b\nhardware: dgx-a100\n";
  EXPECT_EQ(cli({"validate", scenario}), 0) << last_err;
}

TEST(CliCost, GemmAndCollectives) {
  EXPECT_EQ(cli({"cost", "gemm", "--gpu", "A100-SXM4-80GB", "--m", "4096", "--n", "4096", "--k", "4096", "--json"}), 0);
  const auto g = nlohmann::json::parse(last_out);
  EXPECT_GT(g["tflops"].get<double>(), 100.0);
  EXPECT_LT(g["tflops"].get<double>(), 312.0);
  EXPECT_EQ(cli({"cost", "gemm", "--gpu", "dgx-h100", "--m", "8", "--n", "8", "--k", "8"}), 0);  // cluster → its GPU
  EXPECT_EQ(cli({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "1e8", "--json"}), 0);
  const auto a = nlohmann::json::parse(last_out);
  EXPECT_GT(a["busbw_GBps"].get<double>(), 100.0);
  EXPECT_LE(a["busbw_GBps"].get<double>(), 300.0);  // never above the NVSwitch link rate
  EXPECT_EQ(cli({"cost", "gemm", "--gpu", "A100", "--m", "1", "--n", "1", "--k", "1"}), 2);
  EXPECT_NE(last_err.find("valid:"), std::string::npos);
  EXPECT_EQ(cli({"cost", "sendrecv", "--hardware", "dgx-a100", "--gpus", "1", "--bytes", "10"}), 2);
}

TEST(CliCost, DeepEpDispatchAndCombine) {
  const std::vector<std::string> ll{"cost", "dispatch", "--kernel", "deepep-ll", "--hardware", "dgx-h100", "--nodes", "2",
                                    "--tokens", "128", "--hidden", "7168", "--top-k", "8", "--experts", "256", "--json"};
  ASSERT_EQ(cli(ll), 0) << last_err;
  const auto d = nlohmann::json::parse(last_out);
  EXPECT_EQ(d["ep"].get<int>(), 16);  // every GPU of the two nodes
  EXPECT_EQ(d["counted_bytes"].get<double>(), 128 * 8 * 7408.0);
  EXPECT_EQ(cli({"cost", "combine", "--hardware", "dgx-h100", "--nodes", "4", "--tokens", "4096", "--hidden", "7168",
                 "--top-k", "8", "--experts", "256", "--topk-groups", "4", "--sms", "24"}),
            0)
      << last_err;
  EXPECT_NE(last_out.find("GB/s (RDMA)"), std::string::npos) << last_out;
  EXPECT_EQ(cli({"cost", "dispatch", "--kernel", "nccl", "--hardware", "dgx-h100", "--tokens", "64", "--hidden", "1024",
                 "--top-k", "2", "--experts", "8"}),
            0)
      << last_err;
  EXPECT_EQ(cli({"cost", "allreduce", "--hardware", "dgx-h100", "--nodes", "2", "--gpus", "16", "--bytes", "1e6"}), 0);
  // Bad input: EP beyond the cluster, experts that do not divide, an odd SM budget, a NIC-less cluster
  // across nodes, an unknown kernel: exit 2 with the option named.
  EXPECT_EQ(cli({"cost", "dispatch", "--hardware", "dgx-h100", "--ep", "16", "--tokens", "1", "--hidden", "7168",
                 "--top-k", "8", "--experts", "256"}),
            2);
  EXPECT_NE(last_err.find("--ep"), std::string::npos) << last_err;
  EXPECT_EQ(cli({"cost", "dispatch", "--hardware", "dgx-h100", "--tokens", "1", "--hidden", "7168", "--top-k", "8",
                 "--experts", "250"}),
            2);
  EXPECT_EQ(cli({"cost", "dispatch", "--hardware", "dgx-h100", "--tokens", "1", "--hidden", "7168", "--top-k", "8",
                 "--experts", "256", "--sms", "5"}),
            2);
  EXPECT_EQ(cli({"cost", "dispatch", "--hardware", "hgx-a100-4gpu-nvlink", "--nodes", "2", "--tokens", "1", "--hidden",
                 "7168", "--top-k", "8", "--experts", "256"}),
            2);
  EXPECT_NE(last_err.find("RDMA"), std::string::npos) << last_err;
  EXPECT_EQ(cli({"cost", "dispatch", "--kernel", "deepep", "--hardware", "dgx-h100", "--tokens", "1", "--hidden", "7168",
                 "--top-k", "8", "--experts", "256"}),
            2);
}

TEST(CliList, EveryRegistry) {
  EXPECT_EQ(cli({"list", "policies"}), 0);
  EXPECT_NE(last_out.find("\nstatic-ep "), std::string::npos);
  EXPECT_EQ(cli({"list", "hardware"}), 0);
  EXPECT_NE(last_out.find("dgx1-v100"), std::string::npos);
  EXPECT_NE(last_out.find("H100-SXM-80GB"), std::string::npos);
  EXPECT_EQ(cli({"list", "routing"}), 0);
  last_out = "\n" + last_out;
  for (const char* r : {"uniform", "skewed", "moeshard", "skewness", "zipf", "exponential", "fluctuating", "trace"})
    EXPECT_NE(last_out.find(std::string("\n") + r + " "), std::string::npos) << r;
  EXPECT_EQ(cli({"list", "predictors"}), 0);
  last_out = "\n" + last_out;
  for (const char* p : {"none", "oracle", "distribution-only", "token-to-expert"})
    EXPECT_NE(last_out.find(std::string("\n") + p + " "), std::string::npos) << p;
  EXPECT_NE(last_out.find("accuracy (number, default 0.9"), std::string::npos) << last_out;
  EXPECT_NE(last_out.find("window (integer, default 8, batches)"), std::string::npos) << last_out;
  EXPECT_EQ(cli({"list", "models"}), 0);
  EXPECT_NE(last_out.find("deepseek-v3"), std::string::npos);
  EXPECT_EQ(cli({"list", "engines"}), 0);
  for (const char* e : {"none ", "vllm ", "sglang ", "trtllm "}) EXPECT_NE(last_out.find(e), std::string::npos) << e;
  EXPECT_EQ(cli({"list", "nonsense"}), 2);
}

}  // namespace moesim
