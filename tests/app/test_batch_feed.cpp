// Prefill batches planned layer by layer while they run (serving/batch_feed.hpp, driven by serving/prefill_driver.hpp) give exactly the
// metrics of the whole plan built up front, for every policy and for predictors that spend time
// or learn online; the per-GPU breakdown does not depend on how its tasks were handed over.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "app/run/gpu_time.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

// Two DGX-1 nodes (inter-node all-to-alls and ring collectives), dense and MoE layers, a warm-up
// batch, and policies with weight copies, fetches, restores after the layer (harmoeny) and
// re-solves across batches.
const char* kScenario = R"(name: fed
seed: 3
model: {preset: switch-base-64, layers: 4}
hardware: {preset: dgx1-v100, nodes: 2}
workload: {batch_size: 32, seq_len: 64, batches: 3, warmup_batches: 1, routing: {kind: skewed, alpha: 0.8, hot_experts: 4}}
policy:
  - static-ep
  - {name: static-ep, label: cap, capacity_factor: 1.0}
  - harmoeny
  - {name: harmoeny, label: sync, fetch: sync}
  - fastermoe
  - {name: eplb, rebalance_every: 1}
  - {name: exflow, resolve_every: 1, solve_ms: 0.5, profile_batches: 2}
  - moegps-dup
  - moeshard
  - tp-experts
  - even-split
predictor: [none, {name: token-to-expert, accuracy: 0.8}, {name: distribution-only, online: true}]
)";

}  // namespace

TEST(BatchFeed, LayerByLayerRunsMatchTheWholePlan) {
  const fs::path dir = fs::temp_directory_path() /
                       ("moesim-batch-feed-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Without a trace directory every batch is fed layer by layer; with one, each is planned whole
  // (the trace needs every task) and timed by PlanExecutor::run.
  const auto fed = run_scenario(load_scenario_text(kScenario, "fed.yaml"));
  const auto whole = run_scenario(load_scenario_text(kScenario, "fed.yaml", {"output.trace=true"}), dir.string());
  fs::remove_all(dir);
  ASSERT_EQ(fed["runs"].size(), 33u);
  ASSERT_EQ(whole["runs"].size(), fed["runs"].size());
  for (std::size_t i = 0; i < fed["runs"].size(); ++i) {
    SCOPED_TRACE(fed["runs"][i]["label"].get<std::string>() + " / " + fed["runs"][i]["predictor_label"].get<std::string>());
    ASSERT_TRUE(whole["runs"][i].contains("trace"));
    EXPECT_EQ(fed["runs"][i]["metrics"].dump(), whole["runs"][i]["metrics"].dump());
    EXPECT_GT(fed["runs"][i]["metrics"]["layer_latency_ms"]["mean"].get<double>(), 0.0);
  }
}

// Random tasks on three GPUs handed over in id order in random chunks, each with the earliest
// start of the tasks still to come as its horizon: the same breakdown as the whole plan's.
TEST(GpuTimeSweep, AnySplitOfTheHandOversGivesTheSameBreakdown) {
  std::mt19937_64 rng(7);
  TaskGraph g;
  std::vector<TaskTiming> timing;
  for (int i = 0; i < 400; ++i) {
    const Tick s = static_cast<Tick>(rng() % 1000), e = s + static_cast<Tick>(rng() % 80);
    const int gpu = static_cast<int>(rng() % 3), other = static_cast<int>((gpu + 1 + rng() % 2) % 3);
    switch (rng() % 4) {
      case 0: g.compute(gpu, phase::kExperts, 0, {}); break;
      case 1: g.transfer(gpu, other, 1.0, phase::kDispatch, 0); break;
      case 2: g.transfer(3, gpu, 1.0, phase::kFetch, 0, {}, gpu, CopyEngine::kHostToDevice); break;
      default: g.delay(1, phase::kSchedule, 0, {}, gpu); break;
    }
    timing.push_back({s, s, e});
  }
  const std::vector<GpuTime> expected = gpu_time_breakdown(g, timing, 3, 0, 1100);
  for (int trial = 0; trial < 20; ++trial) {
    GpuTimeSweep sweep(3, 0);
    std::size_t id = 0;
    while (id < timing.size()) {
      const std::size_t end = std::min(timing.size(), id + 1 + static_cast<std::size_t>(rng() % 60));
      for (; id < end; ++id) sweep.add(g.task(static_cast<TaskId>(id)), timing[id]);
      Tick horizon = kTickMax;
      for (std::size_t later = end; later < timing.size(); ++later) horizon = std::min(horizon, timing[later].start);
      sweep.advance(horizon);
    }
    const std::vector<GpuTime> got = sweep.finish(1100);
    for (int gpu = 0; gpu < 3; ++gpu) {
      EXPECT_EQ(got[gpu].compute, expected[gpu].compute);
      EXPECT_EQ(got[gpu].copy, expected[gpu].copy);
      EXPECT_EQ(got[gpu].communication, expected[gpu].communication);
      EXPECT_EQ(got[gpu].scheduling, expected[gpu].scheduling);
      EXPECT_EQ(got[gpu].waiting, expected[gpu].waiting);
    }
  }
  EXPECT_GT(expected[0].compute, 0);
  EXPECT_GT(expected[1].communication, 0);
}

}  // namespace moesim
