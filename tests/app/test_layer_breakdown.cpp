// A MoE layer's latency by activity (MoE-GPS Fig. 6's bars), on hand-made plans with closed-form
// timings: sequential phases land in their own parts, overlaps go to the higher-precedence
// activity, and the parts always sum to the layer's latency.
#include <gtest/gtest.h>

#include "app/run/layer_breakdown.hpp"
#include "sim/flow_network.hpp"
#include "sim/simulator.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

constexpr Tick U = kPsPerUs;

// Two GPUs; compute takes `flops` ticks; a link moves one byte per tick.
struct Engine {
  Simulator sim;
  FlowNetwork net{sim};
  std::vector<std::vector<std::vector<LinkId>>> routes{2, std::vector<std::vector<LinkId>>(2)};
  PlanExecutor exec{sim, net, 2,
                    {[](const Task&, std::span<const Op> ops) { return static_cast<Tick>(ops[0].flops); },
                     [this](int s, int d) -> const std::vector<LinkId>& { return routes[s][d]; }}};
  Engine() {
    routes[0][1] = {net.add_link("0->1", 1e12, 0)};
    routes[1][0] = {net.add_link("1->0", 1e12, 0)};
  }
};

std::vector<Op> work(Tick ticks) {
  Op op;
  op.flops = static_cast<double>(ticks);
  return {op};
}

TEST(LayerBreakdown, SequentialPhasesAndOverlaps) {
  TaskGraph g;
  // Layer 0 is a MoE layer: predictor [0,5), attention [5,25), router [25,30) on GPU 0;
  // dispatch 0→1 [30,60); experts on GPU 1 [60,100) while GPU 0 sends more [60,80).
  const TaskId p = g.delay(5 * U, phase::kPredict, 0, {}, 0);
  const TaskId pd[] = {p};
  const TaskId a = g.compute(0, phase::kAttention, 0, work(20 * U), pd);
  const TaskId ad[] = {a};
  const TaskId r = g.compute(0, phase::kRouter, 0, work(5 * U), ad);
  const TaskId rd[] = {r};
  const TaskId x = g.transfer(0, 1, 30.0 * U, phase::kDispatch, 0, rd, 0);
  const TaskId xd[] = {x};
  g.compute(1, phase::kExperts, 0, work(40 * U), xd);
  g.transfer(0, 1, 20.0 * U, phase::kCombine, 0, xd, 0);
  Engine e;
  const auto timing = e.exec.run(g);
  const auto parts = moe_layer_breakdown(g, timing, 0);
  ASSERT_EQ(parts.size(), 1u);
  const double tol = 1e-5;  // ms: flows end on whole ticks
  EXPECT_NEAR(parts[0].overhead, 0.005, tol);
  EXPECT_NEAR(parts[0].attention, 0.025, tol);      // attention and router
  EXPECT_NEAR(parts[0].communication, 0.030, tol);  // the second transfer hides under the experts
  EXPECT_NEAR(parts[0].ffn, 0.040, tol);
  EXPECT_NEAR(parts[0].idle, 0.0, tol);
  EXPECT_NEAR(parts[0].total(), 0.100, tol);
}

TEST(LayerBreakdown, OnlyMoeLayersAndGapsAreIdle) {
  TaskGraph g;
  // Layer 0 (dense, no router) on GPU 0 [0,10); layer 1 (MoE): router on GPU 1 [0,4), then,
  // after layer 0, a merge on GPU 0 [10,16). Layer 1's window is [10,16): only the merge counts;
  // the router ran before the window opened.
  const TaskId d = g.compute(0, phase::kDense, 0, work(10 * U));
  g.compute(1, phase::kRouter, 1, work(4 * U));
  const TaskId dd[] = {d};
  const TaskId w = g.delay(2 * U, phase::kOther, -1, dd);  // nothing runs [10,12)
  const TaskId wd[] = {w};
  g.compute(0, phase::kMerge, 1, work(4 * U), wd);
  Engine e;
  const auto timing = e.exec.run(g);
  const auto parts = moe_layer_breakdown(g, timing, 0);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_NEAR(parts[0].idle, 0.002, 1e-6);
  EXPECT_NEAR(parts[0].attention, 0.004, 1e-6);
  EXPECT_NEAR(parts[0].total(), 0.006, 1e-6);
}

}  // namespace
}  // namespace moesim
