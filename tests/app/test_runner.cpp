// End-to-end runs: determinism, seeds, metric sanity, and the quickstart golden file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "app/runner.hpp"
#include "app/scenario.hpp"

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
