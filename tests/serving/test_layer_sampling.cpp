// Layer sampling (serving.layer_sampling, issue 27): which MoE layers a step plans and what each
// stands for; a repeated task's time and bytes against its closed form; a step of identical
// layers times exactly as the unsampled one; a skewed run stays close to it with far fewer
// events; combinations the engine cannot sample are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"
#include "serve_metrics.hpp"
#include "serving/step_planner.hpp"
#include "sim/flow_network.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

TEST(LayerSample, OneLayerPerBlockRotatingWithTheStep) {
  // 10 MoE layers in blocks of 4: [0, 4), [4, 8), [8, 10).
  for (int offset = 0; offset < 8; ++offset) {
    const LayerSample s{4, offset};
    int planned = 0, weight = 0;
    for (int l = 0; l < 10; ++l)
      if (s.planned(l, 10)) {
        ++planned;
        weight += s.weight(l, 10);
      }
    EXPECT_EQ(planned, 3) << offset;
    EXPECT_EQ(weight, 10) << offset;  // the planned layers stand for every layer
    EXPECT_TRUE(s.planned(offset % 4, 10));
    EXPECT_TRUE(s.planned(8 + offset % 2, 10));
  }
  // Over `every` consecutive steps each layer of a full block is planned once.
  for (int l = 0; l < 4; ++l) {
    int times = 0;
    for (int step = 0; step < 4; ++step) times += LayerSample{4, step}.planned(l, 10) ? 1 : 0;
    EXPECT_EQ(times, 1);
  }
  EXPECT_TRUE(LayerSample{}.planned(7, 10));
  EXPECT_EQ(LayerSample{}.weight(7, 10), 1);
}

// next_planned (the loops' way from one planned layer to the next) finds exactly the layers
// planned() names, for every block size, offset and layer count, exact sampling included.
TEST(LayerSample, NextPlannedVisitsThePlannedLayersInOrder) {
  for (int layers = 1; layers <= 61; layers += 3)
    for (int every : {1, 2, 3, 4, 7, 16, 256})
      for (int offset : {0, 1, 2, 5, 11, 1000003}) {
        const LayerSample s{every, offset};
        std::vector<int> by_planned, by_next;
        for (int l = 0; l < layers; ++l)
          if (s.planned(l, layers)) by_planned.push_back(l);
        for (int l = s.next_planned(0, layers); l < layers; l = s.next_planned(l + 1, layers)) by_next.push_back(l);
        EXPECT_EQ(by_next, by_planned) << layers << " layers, every " << every << ", offset " << offset;
        for (int l = 0; l <= layers; ++l) {
          const int n = s.next_planned(l, layers);
          EXPECT_TRUE(n == layers || (n >= l && s.planned(n, layers)));
        }
      }
}

TEST(LayerSample, RepeatedTasksTakeTheirTimeAndBytesThatManyTimes) {
  // One GPU pair over a 1 GB/s link: a compute of 1,000 ticks, a delay of 500 and a 1 MB flow
  // (1 ms = 10^9 ticks), each standing for 3 copies, run back to back.
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId ab = net.add_link("0->1", 1e9, 0);
  const std::vector<LinkId> route{ab}, none;
  PlanExecutor exec(sim, net, 2,
                    {[](const Task&, std::span<const Op> ops) { return static_cast<Tick>(ops[0].flops); },
                     [&](int s, int d) -> const std::vector<LinkId>& { return s == 0 && d == 1 ? route : none; }});
  TaskGraph g;
  Op op;
  op.flops = 1000;
  const TaskId c = g.compute(0, phase::kExperts, 0, std::vector<Op>{op});
  const TaskId c_dep[] = {c};
  const TaskId d = g.delay(500, phase::kOther, 0, c_dep);
  const TaskId d_dep[] = {d};
  const TaskId f = g.transfer(0, 1, 1e6, phase::kDispatch, 0, d_dep, 0);
  g.set_repeat(0, static_cast<TaskId>(g.size()), 3);
  const auto t = exec.run(g);
  EXPECT_EQ(t[c].end - t[c].start, 3000);
  EXPECT_EQ(t[d].end - t[d].start, 1500);
  EXPECT_NEAR(static_cast<double>(t[f].end - t[f].start), 3e9, 2.0);
  EXPECT_THROW(g.set_repeat(0, 1, 0), std::logic_error);
}

// Mixtral cut to `layers` layers on one DGX H100; with top_k = experts every token selects every
// expert, so every layer of a step routes (and costs) exactly the same.
std::string scenario(const std::string& serving, int layers, int top_k, int output = 6) {
  return "name: sampling\n"
         "seed: 5\n"
         "model: {preset: mixtral-8x7b, layers: " + std::to_string(layers) + ", top_k: " + std::to_string(top_k) + "}\n"
         "hardware: dgx-h100\n"
         "workload: {kind: serving, requests: 16, arrival: {process: closed, clients: 16}, prompt_tokens: 256, "
         "output_tokens: " + std::to_string(output) + ", routing: {kind: skewed, alpha: 0.4, hot_experts: 2}}\n"
         "serving: " + serving + "\n"
         "policy: static-ep\n"
         "predictor: none\n";
}

nlohmann::json serve(const std::string& text) { return testing::serve_metrics(text, "sampling.yaml"); }

double makespan(const nlohmann::json& m) { return m["makespan_ms"].get<double>(); }

TEST(LayerSampling, IdenticalLayersTimeAsTheWholeStep) {
  // Blocks of 2 (4 = 2 + 2) and of 3 (4 = 3 + 1): the sampled layer stands for its block, and
  // as every layer costs the same, the run's times equal the unsampled run's but for the
  // rounding of repeated transfers (a tick per layer at most).
  const nlohmann::json exact = serve(scenario("{}", 4, 8));
  for (const int every : {2, 3}) {
    const nlohmann::json sampled = serve(scenario("{layer_sampling: " + std::to_string(every) + "}", 4, 8));
    EXPECT_NEAR(makespan(sampled), makespan(exact), 1e-6 * makespan(exact)) << every;
    EXPECT_NEAR(sampled["tpot_ms"]["p50"].get<double>(), exact["tpot_ms"]["p50"].get<double>(), 1e-6) << every;
    EXPECT_LT(sampled["events"].get<double>(), exact["events"].get<double>()) << every;
    // Traffic is counted for every layer a sampled one stands for.
    for (const char* cls : {"intra_node", "intra_gpu"})
      EXPECT_NEAR(sampled["bytes"][cls].get<double>(), exact["bytes"][cls].get<double>(),
                  1e-9 * exact["bytes"][cls].get<double>())
          << every << " " << cls;
    EXPECT_EQ(sampled["steps"]["count"], exact["steps"]["count"]);
  }
}

TEST(LayerSampling, SkewedRoutingStaysCloseWithFewerEvents) {
  // Top-2 of 8 under skew: layers differ by their draws, so sampling is an estimate. Over 16
  // layers and 24 steps its error stays within a few percent (docs/benchmarks.md measures the
  // benchmark cases), with about 1/4 of the events.
  const nlohmann::json exact = serve(scenario("{}", 16, 2, 24));
  const nlohmann::json sampled = serve(scenario("{layer_sampling: 4}", 16, 2, 24));
  EXPECT_NEAR(makespan(sampled) / makespan(exact), 1.0, 0.05);
  EXPECT_NEAR(sampled["tpot_ms"]["mean"].get<double>() / exact["tpot_ms"]["mean"].get<double>(), 1.0, 0.05);
  EXPECT_LT(sampled["events"].get<double>(), 0.35 * exact["events"].get<double>());
}

TEST(LayerSampling, CombinationsItCannotSampleAreRefused) {
  EXPECT_THROW(load_scenario_text(scenario("{layer_sampling: 0}", 4, 2), "s.yaml"), InputError);
  EXPECT_THROW(load_scenario_text(scenario("{layer_sampling: 2, two_batch_overlap: true}", 4, 2), "s.yaml"), InputError);
  std::string amoe = scenario("{layer_sampling: 2}", 4, 2);
  amoe.replace(amoe.find("policy: static-ep"), 17, "policy: amoe");
  EXPECT_THROW(load_scenario_text(amoe, "s.yaml"), InputError);
  EXPECT_NO_THROW(load_scenario_text(scenario("{layer_sampling: 2}", 4, 2), "s.yaml"));
}

}  // namespace
}  // namespace moesim
