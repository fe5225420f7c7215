// End-to-end runs: determinism, seeds, metric sanity, and the quickstart golden file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"

namespace moesim {
namespace {

const char* kScenario = R"(name: e2e
seed: 5
model: {preset: switch-base-64, layers: 4}
hardware: dgx1-v100
workload: {batch_size: 16, seq_len: 64, batches: 3, routing: {kind: skewed, alpha: 0.8, hot_experts: 4}}
policy: [static-ep, {name: static-ep, label: rr, placement: round-robin}, {name: static-ep, label: cf, capacity_factor: 1.0}]
)";

std::string source_root() {
  const char* r = std::getenv("MOESIM_SOURCE_ROOT");
  return r ? r : ".";
}

}  // namespace

TEST(Runner, SameSeedGivesIdenticalResult) {
  const Scenario s = load_scenario_text(kScenario, "e2e.yaml");
  EXPECT_EQ(run_scenario(s).dump(), run_scenario(s).dump());
}

TEST(Runner, DifferentSeedChangesTheDraws) {
  const auto a = run_scenario(load_scenario_text(kScenario, "e2e.yaml"));
  const auto b = run_scenario(load_scenario_text(kScenario, "e2e.yaml", {"seed=6"}));
  EXPECT_NE(a["runs"][0]["metrics"].dump(), b["runs"][0]["metrics"].dump());
}

// hardware.flow_completion_window_us (an approximation, off by default): flows due within the
// window of the earliest completion end with it, so the skewed all-to-alls take fewer events;
// the bytes are the same and the batches' latency moves by far less than a window per transfer.
TEST(Runner, FlowCompletionWindowBatchesCompletionsAndKeepsBytes) {
  const auto exact = run_scenario(load_scenario_text(kScenario, "e2e.yaml"));
  const auto off = run_scenario(load_scenario_text(kScenario, "e2e.yaml", {"hardware.flow_completion_window_us=0"}));
  EXPECT_EQ(exact["runs"].dump(), off["runs"].dump());  // 0 is exact: the default
  const auto windowed =
      run_scenario(load_scenario_text(kScenario, "e2e.yaml", {"hardware.flow_completion_window_us=5"}));
  ASSERT_EQ(windowed["runs"].size(), exact["runs"].size());
  for (std::size_t r = 0; r < exact["runs"].size(); ++r) {
    const auto& a = exact["runs"][r]["metrics"];
    const auto& b = windowed["runs"][r]["metrics"];
    EXPECT_LT(b["events"].get<double>(), a["events"].get<double>());
    EXPECT_EQ(b["bytes"].dump(), a["bytes"].dump());
    const double ttft = a["ttft_ms"]["mean"].get<double>();
    EXPECT_NEAR(b["ttft_ms"]["mean"].get<double>(), ttft, 0.01 * ttft);
    EXPECT_NE(b["ttft_ms"]["mean"].get<double>(), ttft);  // the window did batch something
  }
}

TEST(Runner, MetricsAreConsistent) {
  const auto r = run_scenario(load_scenario_text(kScenario, "e2e.yaml"));
  ASSERT_EQ(r["runs"].size(), 3u);
  for (const auto& run : r["runs"]) {
    const auto& m = run["metrics"];
    EXPECT_GT(m["layer_latency_ms"]["mean"].get<double>(), 0.0);
    EXPECT_LE(m["layer_latency_ms"]["p50"].get<double>(), m["layer_latency_ms"]["p99"].get<double>());
    EXPECT_GT(m["ttft_ms"]["mean"].get<double>(), m["layer_latency_ms"]["mean"].get<double>());
    EXPECT_EQ(m["gpu_idle_fraction"]["per_gpu"].size(), 8u);
    for (const auto& f : m["gpu_idle_fraction"]["per_gpu"]) {
      EXPECT_GE(f.get<double>(), 0.0);
      EXPECT_LT(f.get<double>(), 1.0);
    }
    EXPECT_GT(m["bytes"]["intra_node"].get<double>(), 0.0);
    EXPECT_EQ(m["bytes"]["inter_node"].get<double>(), 0.0);
    // Throughput is tokens over the simulated time of the batches.
    EXPECT_NEAR(m["throughput_tokens_per_s"].get<double>(),
                3 * 16 * 64 / (m["ttft_ms"]["mean"].get<double>() * 3 / 1000.0), 1e-6 * m["throughput_tokens_per_s"].get<double>());
    EXPECT_GT(m["load"]["skewness"].get<double>(), 1.5);
  }
  // Hot experts 0-3 sit on GPU 0 under contiguous placement and are spread by round-robin.
  EXPECT_GT(r["runs"][0]["metrics"]["load"]["gpu_max_over_mean"].get<double>(),
            r["runs"][1]["metrics"]["load"]["gpu_max_over_mean"].get<double>());
  // The per-layer standard deviation of GPU load (GRACE-MoE §5.1) orders them the same way.
  EXPECT_GT(r["runs"][0]["metrics"]["load"]["gpu_load_std"].get<double>(),
            r["runs"][1]["metrics"]["load"]["gpu_load_std"].get<double>());
  EXPECT_GT(r["runs"][1]["metrics"]["load"]["gpu_load_std"].get<double>(), 0.0);
  EXPECT_EQ(r["runs"][0]["metrics"]["tokens_dropped"].get<long long>(), 0);
  EXPECT_GT(r["runs"][2]["metrics"]["tokens_dropped"].get<long long>(), 0);
}

TEST(Runner, MoreSkewNeverMakesStaticEpFaster) {
  double prev = 0.0;
  for (const char* alpha : {"0.0", "0.3", "0.6", "0.9"}) {
    const auto r = run_scenario(load_scenario_text(kScenario, "e2e.yaml", {std::string("workload.routing.alpha=") + alpha}));
    const double ms = r["runs"][0]["metrics"]["layer_latency_ms"]["mean"].get<double>();
    EXPECT_GE(ms, prev * 0.999) << "alpha " << alpha;
    prev = ms;
  }
}

// Per-batch records (HarMoEny Fig. 8: throughput per batch under skew that changes per batch) and
// the run's statistics over them.
TEST(Runner, PerBatchMetricsAgreeWithTheSummary) {
  const auto r = run_scenario(load_scenario_text(R"(name: fluct
seed: 9
model: {preset: switch-base-64, layers: 4}
hardware: dgx1-v100
workload: {batch_size: 16, seq_len: 64, batches: 6, routing: {kind: fluctuating, hot_experts: 4}}
policy: static-ep
)", "fluct.yaml"));
  const auto& m = r["runs"][0]["metrics"];
  const auto& per_batch = m["per_batch"];
  ASSERT_EQ(per_batch.size(), 6u);
  std::vector<double> thr, layer, skew, imbalance, a2a;
  double ttft = 0.0, next_start = 0.0;
  for (std::size_t i = 0; i < per_batch.size(); ++i) {
    const auto& b = per_batch[i];
    EXPECT_EQ(b["batch"], static_cast<int>(i));
    EXPECT_EQ(b["tokens"], 16 * 64);
    EXPECT_NEAR(b["start_ms"].get<double>(), next_start, 1e-9);  // batches run back to back
    next_start += b["ttft_ms"].get<double>();
    ttft += b["ttft_ms"].get<double>();
    EXPECT_NEAR(b["throughput_tokens_per_s"].get<double>(), 16 * 64 / (b["ttft_ms"].get<double>() / 1000.0), 1e-6);
    thr.push_back(b["throughput_tokens_per_s"].get<double>());
    layer.push_back(b["layer_latency_ms"].get<double>());
    skew.push_back(b["skewness"].get<double>());
    imbalance.push_back(b["gpu_max_over_mean"].get<double>());
    a2a.push_back(b["alltoall_ms"].get<double>());
    EXPECT_EQ(b["tokens_dropped"], 0);
  }
  auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
  // Every batch has the same number of MoE layers, so the mean of batch means is the overall mean.
  EXPECT_NEAR(ttft / 6, m["ttft_ms"]["mean"].get<double>(), 1e-9);
  EXPECT_NEAR(mean(layer), m["layer_latency_ms"]["mean"].get<double>(), 1e-9);
  EXPECT_NEAR(mean(skew), m["load"]["skewness"].get<double>(), 1e-9);
  EXPECT_NEAR(mean(imbalance), m["load"]["gpu_max_over_mean"].get<double>(), 1e-9);
  EXPECT_NEAR(mean(a2a), m["alltoall_ms"].get<double>(), 1e-9);
  // Population variance in tokens²/s² (HarMoEny §V-B), and the per-batch summary.
  double var = 0.0, drop = 0.0;
  for (double x : thr) var += (x - mean(thr)) * (x - mean(thr)) / thr.size();
  for (std::size_t i = 1; i < thr.size(); ++i) drop = std::max(drop, 1.0 - thr[i] / thr[i - 1]);
  EXPECT_NEAR(m["throughput_tokens_per_s_variance"].get<double>(), var, 1e-9 * var);
  const auto& stats = m["throughput_tokens_per_s_per_batch"];
  EXPECT_NEAR(stats["mean"].get<double>(), mean(thr), 1e-9 * mean(thr));
  EXPECT_EQ(stats["min"].get<double>(), *std::min_element(thr.begin(), thr.end()));
  EXPECT_EQ(stats["max"].get<double>(), *std::max_element(thr.begin(), thr.end()));
  EXPECT_NEAR(stats["max_drop_fraction"].get<double>(), drop, 1e-12);
  // Skew drawn per batch makes static EP's throughput vary.
  EXPECT_GT(*std::max_element(skew.begin(), skew.end()) - *std::min_element(skew.begin(), skew.end()), 2.0);
  EXPECT_GT(std::sqrt(var), 0.05 * mean(thr));
  EXPECT_GT(drop, 0.0);
}

// HarMoEny Fig. 4a: under static EP with the hot experts on GPU 0, the other GPUs wait for it.
TEST(Runner, GpuTimeBreakdownSumsToMakespanAndMatchesIdleFraction) {
  const auto r = run_scenario(load_scenario_text(kScenario, "e2e.yaml"));
  for (const auto& run : r["runs"]) {
    const auto& m = run["metrics"];
    const double makespan = m["makespan_ms"].get<double>();
    const auto& per_gpu = m["gpu_time_breakdown"]["per_gpu_ms"];
    ASSERT_EQ(per_gpu.size(), 8u);
    for (std::size_t g = 0; g < per_gpu.size(); ++g) {
      const auto& t = per_gpu[g];
      const double sum = t["compute"].get<double>() + t["copy"].get<double>() + t["communication"].get<double>() +
                         t["scheduling"].get<double>() + t["waiting"].get<double>();
      EXPECT_NEAR(sum, makespan, 1e-9 * makespan);
      for (const auto& [k, v] : t.items()) EXPECT_GE(v.get<double>(), 0.0) << k;
      // gpu_idle_fraction keeps its meaning: neither computing nor copying.
      EXPECT_NEAR(m["gpu_idle_fraction"]["per_gpu"][g].get<double>(),
                  1.0 - (t["compute"].get<double>() + t["copy"].get<double>()) / makespan, 1e-12);
    }
    double fractions = 0.0;
    for (const auto& [k, v] : m["gpu_time_breakdown"]["mean_fraction"].items()) fractions += v.get<double>();
    EXPECT_NEAR(fractions, 1.0, 1e-12);
  }
  const auto& contiguous = r["runs"][0]["metrics"]["gpu_time_breakdown"]["per_gpu_ms"];
  for (std::size_t g = 1; g < contiguous.size(); ++g) {
    EXPECT_GT(contiguous[g]["waiting"].get<double>(), 5 * contiguous[0]["waiting"].get<double>()) << g;
    EXPECT_LT(contiguous[g]["compute"].get<double>(), contiguous[0]["compute"].get<double>()) << g;
  }
}

// --- predictors (MoE-GPS §3.2–3.3) wired into runs ---------------------------------------------

namespace {

const std::string kPredicted = std::string(kScenario) +
                               "predictor: [none, oracle, distribution-only, {name: token-to-expert, label: t2e, "
                               "accuracy: 0.8}]\n";

// The run of `policy` and `predictor` labels.
const nlohmann::json& run_of(const nlohmann::json& r, const std::string& policy, const std::string& predictor) {
  for (const auto& run : r["runs"])
    if (run["label"] == policy && run["predictor_label"] == predictor) return run;
  throw std::runtime_error("no run " + policy + " x " + predictor);
}

}  // namespace

TEST(RunnerPredictors, RunsArePoliciesTimesPredictorsWithTheirMetrics) {
  const Scenario s = load_scenario_text(kPredicted, "e2e.yaml");
  const auto r = run_scenario(s);
  ASSERT_EQ(r["runs"].size(), 3u * 4u);
  // Policies outermost, predictors in their listed order.
  EXPECT_EQ(r["runs"][1]["label"], "static-ep");
  EXPECT_EQ(r["runs"][1]["predictor"], "oracle");
  EXPECT_EQ(r["runs"][3]["predictor"], "token-to-expert");
  EXPECT_EQ(r["runs"][3]["predictor_label"], "t2e");
  EXPECT_EQ(r["runs"][4]["label"], "rr");
  for (const auto& run : r["runs"]) {
    const auto& m = run["metrics"];
    ASSERT_TRUE(m.contains("predictor_overhead_ms") && m.contains("prediction_error")) << run["predictor_label"];
    double overhead = 0.0, error = 0.0;
    for (const auto& b : m["per_batch"]) {
      overhead += b["predictor_overhead_ms"].get<double>() / 3;
      error += b["prediction_error"].get<double>() / 3;
    }
    EXPECT_NEAR(overhead, m["predictor_overhead_ms"].get<double>(), 1e-12);
    EXPECT_NEAR(error, m["prediction_error"].get<double>(), 1e-12);
  }
  const auto& none = run_of(r, "static-ep", "none")["metrics"];
  const auto& oracle = run_of(r, "static-ep", "oracle")["metrics"];
  const auto& dist = run_of(r, "static-ep", "distribution-only")["metrics"];
  const auto& t2e = run_of(r, "static-ep", "t2e")["metrics"];
  EXPECT_EQ(none["prediction_error"].get<double>(), 0.0);
  EXPECT_EQ(oracle["prediction_error"].get<double>(), 0.0);
  EXPECT_EQ(oracle["predictor_overhead_ms"].get<double>(), 0.0);
  EXPECT_GT(dist["prediction_error"].get<double>(), 0.0);  // a 1024-token batch never matches p̂ exactly
  EXPECT_EQ(dist["predictor_overhead_ms"].get<double>(), 0.0);
  // 3 batches x 2 MoE layers of 1024 top-1 selections at accuracy 0.8: ε within 4 σ of 0.2.
  ASSERT_EQ(s.model.num_moe_layers(), 2);
  EXPECT_NEAR(t2e["prediction_error"].get<double>(), 0.2, 4 * std::sqrt(0.16 / (3 * 2 * 1024)));
  EXPECT_GT(t2e["predictor_overhead_ms"].get<double>(), 0.0);
  // Until policies consume forecasts, zero-overhead predictors leave the timing as `none` does.
  EXPECT_EQ(oracle["layer_latency_ms"].dump(), none["layer_latency_ms"].dump());
}

// Warm-up batches run (the simulation is the same) but only the later batches are measured.
TEST(Runner, WarmupBatchesRunButAreNotMeasured) {
  const auto all = run_scenario(load_scenario_text(kScenario, "e2e.yaml"));
  const auto warm = run_scenario(load_scenario_text(kScenario, "e2e.yaml", {"workload.warmup_batches=1"}));
  for (std::size_t i = 0; i < all["runs"].size(); ++i) {
    const auto& a = all["runs"][i]["metrics"]["per_batch"];
    const auto& w = warm["runs"][i]["metrics"]["per_batch"];
    ASSERT_EQ(w.size(), a.size() - 1);
    for (std::size_t b = 0; b < w.size(); ++b) EXPECT_EQ(w[b].dump(), a[b + 1].dump());
    EXPECT_EQ(warm["runs"][i]["metrics"]["tokens"].get<std::int64_t>(),
              all["runs"][i]["metrics"]["tokens"].get<std::int64_t>() * 2 / 3);
  }
  try {
    load_scenario_text(kScenario, "e2e.yaml", {"workload.warmup_batches=3"});
    FAIL() << "warm-up of every batch must be an input error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_batches"), std::string::npos);
  }
}

TEST(RunnerPredictors, SameSeedGivesIdenticalResultAndSeedsMoveThePredictorsDraws) {
  const Scenario s = load_scenario_text(kPredicted, "e2e.yaml");
  const auto a = run_scenario(s);
  EXPECT_EQ(a.dump(), run_scenario(s).dump());
  const auto b = run_scenario(load_scenario_text(kPredicted, "e2e.yaml", {"seed=6"}));
  EXPECT_NE(run_of(a, "rr", "t2e")["metrics"]["prediction_error"], run_of(b, "rr", "t2e")["metrics"]["prediction_error"]);
  // The predictor's draws are the same for every policy: each is compared on the same forecasts.
  EXPECT_EQ(run_of(a, "rr", "t2e")["metrics"]["prediction_error"],
            run_of(a, "static-ep", "t2e")["metrics"]["prediction_error"]);
}

// The resolved scenario is complete: loading it again gives the same runs, predictors included
// (the skewed routing's default `hot_list: []` included).
TEST(RunnerPredictors, ResolvedScenarioReproducesTheRuns) {
  const Scenario s = load_scenario_text(kPredicted, "e2e.yaml");
  const Scenario again = load_scenario_text(YAML::Dump(s.resolved), "resolved.yaml");
  ASSERT_EQ(again.predictors.size(), s.predictors.size());
  for (std::size_t i = 0; i < s.predictors.size(); ++i) EXPECT_EQ(again.predictors[i].label, s.predictors[i].label);
  EXPECT_EQ(run_scenario(again)["runs"].dump(), run_scenario(s)["runs"].dump());
}

TEST(RunnerPredictors, OverheadIsSpentAsTimeBeforeEveryMoeLayer) {
  // A flat 0.5 ms per layer (c1 = 0, γ = 0, quoted for the batch's 1024 tokens): every GPU waits
  // it out before each layer's attention.
  const Scenario s = load_scenario_text(
      std::string(kScenario) + "predictor: [none, {name: token-to-expert, label: slow, overhead_c0_ms: 0.5, "
                               "overhead_c1: 0, overhead_skew_exponent: 0, overhead_tokens_ref: 1024}]\n",
      "e2e.yaml", {"policy=static-ep"});
  const auto r = run_scenario(s);
  const int moe_layers = s.model.num_moe_layers();  // switch-base: every other layer
  const auto& none = run_of(r, "static-ep", "none")["metrics"];
  const auto& slow = run_of(r, "static-ep", "slow")["metrics"];
  EXPECT_DOUBLE_EQ(slow["predictor_overhead_ms"].get<double>(), 0.5);
  EXPECT_NEAR(slow["layer_latency_ms"]["mean"].get<double>() - none["layer_latency_ms"]["mean"].get<double>(), 0.5,
              1e-6);
  EXPECT_NEAR(slow["ttft_ms"]["mean"].get<double>() - none["ttft_ms"]["mean"].get<double>(), moe_layers * 0.5,
              1e-6);
  // The delay is in the plan, on each GPU's lane: MoE layers x 3 batches x 0.5 ms of it.
  for (std::size_t g = 0; g < 8; ++g) {
    const double extra = slow["gpu_time_breakdown"]["per_gpu_ms"][g]["scheduling"].get<double>() -
                         none["gpu_time_breakdown"]["per_gpu_ms"][g]["scheduling"].get<double>();
    EXPECT_NEAR(extra, moe_layers * 3 * 0.5, 1e-6) << g;
  }
}

// The default overhead curve's stated design (predictors/token_to_expert.cpp): for Mixtral-8x7B
// batch 1 x 512 on 4x A100 with NVLink, cheap at a = 0.5 and dearer than the layer itself at a = 1.
TEST(RunnerPredictors, DefaultTokenToExpertOverheadBracketsAMixtralLayer) {
  const auto r = run_scenario(load_scenario_text(R"(name: mixtral
model: {preset: mixtral-8x7b, layers: 4}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 1, seq_len: 512, batches: 2, routing: {kind: skewness, skewness: 1.4}}
policy: static-ep
predictor: [none, {name: token-to-expert, accuracy: 0.5}, {name: token-to-expert, accuracy: 1.0}]
)", "mixtral.yaml"));
  const double layer = run_of(r, "static-ep", "none")["metrics"]["layer_latency_ms"]["mean"].get<double>();
  const auto& low = run_of(r, "static-ep", "token-to-expert-accuracy=0.5")["metrics"];
  const auto& high = run_of(r, "static-ep", "token-to-expert-accuracy=1.0")["metrics"];
  EXPECT_LT(low["predictor_overhead_ms"].get<double>(), 0.05 * layer);
  EXPECT_GT(high["predictor_overhead_ms"].get<double>(), layer);
  EXPECT_EQ(high["prediction_error"].get<double>(), 0.0);
}

// Regression: quickstart metrics against tests/regression/quickstart.golden.json (2% tolerance:
// cost-model changes that move results more than that must update the golden file on purpose).
TEST(Regression, QuickstartMatchesGolden) {
  const std::string root = source_root();
  std::ifstream gf(root + "/tests/regression/quickstart.golden.json");
  ASSERT_TRUE(gf) << "missing golden file";
  const nlohmann::json golden = nlohmann::json::parse(gf);
  const auto r = run_scenario(load_scenario(root + "/scenarios/quickstart.yaml"));
  ASSERT_EQ(r["runs"].size(), golden.size());
  for (const auto& run : r["runs"]) {
    const std::string label = run["label"];
    ASSERT_TRUE(golden.contains(label)) << label;
    for (const auto& [path, expected] : golden[label].items()) {
      const double got = run["metrics"][nlohmann::json::json_pointer(path)].get<double>();
      const double want = expected.get<double>();
      EXPECT_NEAR(got, want, 0.02 * std::abs(want) + 1e-9) << label << " " << path;
    }
  }
}

}  // namespace moesim
