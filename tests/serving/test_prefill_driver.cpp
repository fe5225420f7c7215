// The prefill driver (serving/prefill_driver.hpp) on its own: what its observer is handed (every
// task once, in id order, layers closed in order), warm-up batches that run unobserved, a traced
// run equal to the fed one task for task, the predictor taught after every batch, and the peak
// per-GPU expert rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "app/run/run_context.hpp"
#include "app/scenario/scenario.hpp"
#include "hardware/cluster_run.hpp"
#include "policies/memory.hpp"
#include "serving/prefill_driver.hpp"

namespace moesim {
namespace {

// Two DGX-1 nodes, dense and MoE layers (4 model layers, 2 MoE), skewed routing, a policy that
// re-solves across batches and a predictor that learns online.
const char* kScenario = R"(name: driver
seed: 5
model: {preset: switch-base-64, layers: 4}
hardware: {preset: dgx1-v100, nodes: 2}
workload: {batch_size: 16, seq_len: 64, batches: 3, routing: {kind: skewed, alpha: 0.9, hot_experts: 4}}
policy: {name: eplb, rebalance_every: 1}
predictor: {name: distribution-only, online: true}
)";

/// Keeps every task handed over (end time by id) and the layers closed, checking the contract.
class TaskLog final : public BatchObserver {
 public:
  void add(const TaskGraph&, TaskId first, std::span<const TaskTiming> timing, Tick horizon) override {
    EXPECT_EQ(first, static_cast<TaskId>(ends.size())) << "tasks handed over out of order or twice";
    for (const TaskTiming& t : timing) {
      EXPECT_GE(t.start, last_horizon) << "a task started before an earlier hand-over's horizon";
      ends.push_back(t.end);
    }
    last_horizon = horizon;
  }
  void close_layers(int layer) override {
    EXPECT_GE(layer, closed);
    closed = layer;
  }
  std::vector<Tick> ends;
  Tick last_horizon = 0;
  int closed = 0;
};

/// One run of the scenario's policy and predictor through the driver.
struct DriverRun {
  explicit DriverRun(const Scenario& scenario)
      : s(scenario),
        cluster(s.hardware),
        cost(ComputeCostModel::for_cluster(s.hardware)),
        routing(make_routing(s)),
        ctx(policy_context(s, cluster, *routing)),
        policy(policies().get(s.policies[0].name).value.make(s.policies[0].params)),
        predictor(predictors().get(s.predictors[0].name).value.make(s.predictors[0].params)),
        home(home_tokens_of(s.workload, cluster.num_gpus())),
        run(cluster, cost) {
    policy->setup(ctx);
    predictor->setup(predictor_context(s, cluster, *routing));
  }
  PrefillDriver driver() {
    return PrefillDriver(run.exec, *policy, ctx, *routing, *predictor,
                         BatchDraws{s.seed, s.workload.tokens_per_batch(), count_level_routing(s, *routing)}, home);
  }
  const Scenario& s;
  Cluster cluster;
  ComputeCostModel cost;
  std::unique_ptr<RoutingModel> routing;
  PolicyContext ctx;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Predictor> predictor;
  std::vector<std::int64_t> home;
  ClusterRun run;
};

}  // namespace

TEST(PrefillDriver, ObserverSeesEveryTaskOnceAndTheTraceIsTheSameRun) {
  const Scenario s = load_scenario_text(kScenario, "driver.yaml");
  DriverRun fed_run(s), traced_run(s);
  std::vector<TaskLog> fed(3), traced(3);
  std::vector<std::vector<Tick>> trace_ends(3);
  std::vector<std::int64_t> peak(fed_run.home.size(), 0);
  int ended = 0;

  PrefillDriver::Hooks hooks;
  hooks.begin_batch = [&](int b) { return &fed[static_cast<std::size_t>(b)]; };
  hooks.end_batch = [&](int b, const BatchFeed& feed) {
    EXPECT_EQ(b, ended++);
    EXPECT_EQ(feed.moe().size(), 2u);
    EXPECT_EQ(feed.routings().size(), 2u) << "an online predictor is taught every MoE layer's routing";
    for (const auto& moe : feed.moe()) {
      const auto& rows = moe.gpu_rows.empty() ? moe.gpu_tokens : moe.gpu_rows;
      for (std::size_t g = 0; g < rows.size(); ++g) peak[g] = std::max(peak[g], rows[g]);
    }
  };
  PrefillDriver driver = fed_run.driver();
  driver.run(3, hooks);
  EXPECT_EQ(ended, 3);
  EXPECT_EQ(driver.peak_selections(), peak);
  EXPECT_GT(*std::max_element(peak.begin(), peak.end()), 0);

  PrefillDriver::Hooks trace_hooks;
  trace_hooks.begin_batch = [&](int b) { return &traced[static_cast<std::size_t>(b)]; };
  trace_hooks.trace = [&](int b, const TaskGraph& plan, const std::vector<TaskTiming>& timing) {
    EXPECT_EQ(static_cast<std::size_t>(plan.size()), timing.size());
    for (const TaskTiming& t : timing) trace_ends[static_cast<std::size_t>(b)].push_back(t.end);
  };
  PrefillDriver traced_driver = traced_run.driver();
  traced_driver.run(3, trace_hooks);

  for (std::size_t b = 0; b < 3; ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    EXPECT_EQ(fed[b].closed, 4) << "every model layer closed";
    ASSERT_FALSE(fed[b].ends.empty());
    // Fed a layer at a time or planned whole, the same tasks end at the same ticks.
    EXPECT_EQ(fed[b].ends, traced[b].ends);
    EXPECT_EQ(traced[b].ends, trace_ends[b]);
    if (b > 0) {
      EXPECT_GT(fed[b].ends.front(), fed[b - 1].ends.back()) << "batches run one after another";
    }
  }
  EXPECT_EQ(traced_driver.peak_selections(), peak);
}

TEST(PrefillDriver, UnobservedBatchesStillRunAndTeach) {
  const Scenario s = load_scenario_text(kScenario, "driver.yaml");
  DriverRun all(s), warm(s);
  std::vector<TaskLog> every(3), last(1);
  PrefillDriver::Hooks observe_all, observe_last;
  observe_all.begin_batch = [&](int b) { return &every[static_cast<std::size_t>(b)]; };
  observe_last.begin_batch = [&](int b) -> BatchObserver* { return b == 2 ? &last[0] : nullptr; };
  all.driver().run(3, observe_all);
  warm.driver().run(3, observe_last);
  // The warm-up batches ran (the clock moved on) and taught the policy and predictor the same.
  EXPECT_EQ(every[2].ends, last[0].ends);
  EXPECT_EQ(all.run.sim.now(), warm.run.sim.now());
}

}  // namespace moesim
