// Plan execution: compute streams serialise, transfers use the network, dependencies hold.
#include <gtest/gtest.h>

#include "sim/flow_network.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {

namespace {
struct Fixture {
  Simulator sim;
  FlowNetwork net{sim};
  std::vector<std::vector<std::vector<LinkId>>> routes;
  PlanExecutor make() {
    const LinkId ab = net.add_link("0->1", 1e9, 0);
    const LinkId ba = net.add_link("1->0", 1e9, 0);
    routes = {{{}, {ab}}, {{ba}, {}}};
    return PlanExecutor(sim, net, 2,
                        {[](const Task&, std::span<const Op> ops) { return static_cast<Tick>(ops[0].flops); },
                         [this](int s, int d) -> const std::vector<LinkId>& { return routes[s][d]; }});
  }
};
Op work(double ticks) {
  Op op;
  op.flops = ticks;
  return op;
}
}  // namespace

TEST(PlanExecutor, ComputeOnOneGpuSerialises) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  const TaskId a = g.compute(0, phase::kExperts, 0, {work(100)});
  const TaskId b = g.compute(0, phase::kExperts, 0, {work(50)});
  const TaskId c = g.compute(1, phase::kExperts, 0, {work(70)});
  const auto t = ex.run(g);
  EXPECT_EQ(t[a].start, 0);
  EXPECT_EQ(t[a].end, 100);
  EXPECT_EQ(t[b].start, 100);  // waited for the stream
  EXPECT_EQ(t[b].end, 150);
  EXPECT_EQ(t[c].end, 70);  // other GPU runs in parallel
}

TEST(PlanExecutor, DependenciesAndTransfers) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  const TaskId a = g.compute(0, phase::kAttention, 0, {work(1000)});
  const TaskId deps_a[] = {a};
  const TaskId x = g.transfer(0, 1, 1e6, phase::kDispatch, 0, deps_a);  // 1 MB at 1 GB/s = 1 ms
  const TaskId deps_x[] = {x};
  const TaskId b = g.compute(1, phase::kExperts, 0, {work(10)}, deps_x);
  const auto t = ex.run(g);
  EXPECT_EQ(t[x].start, 1000);
  EXPECT_NEAR(static_cast<double>(t[x].end), 1000.0 + 1e9, 2.0);
  EXPECT_EQ(t[b].start, t[x].end);
  EXPECT_EQ(t[b].end, t[x].end + 10);
}

TEST(PlanExecutor, CopyEngineSerialisesItsTransfers) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  const TaskId a = g.transfer(1, 0, 1e6, phase::kFetch, 0, {}, 0, CopyEngine::kHostToDevice);
  const TaskId b = g.transfer(1, 0, 1e6, phase::kFetch, 0, {}, 0, CopyEngine::kHostToDevice);
  const auto t = ex.run(g);
  EXPECT_EQ(t[b].start, t[a].end);  // one engine: second copy waits, at full rate afterwards
  EXPECT_NEAR(static_cast<double>(t[b].end), 2e9, 4.0);
}

TEST(PlanExecutor, DelayAndJoin) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  const TaskId d1 = g.delay(300, phase::kSchedule, -1);
  const TaskId d2 = g.delay(500, phase::kSchedule, -1);
  const TaskId both[] = {d1, d2};
  const TaskId j = g.join(both);
  const auto t = ex.run(g);
  EXPECT_EQ(t[j].end, 500);
}

TEST(TaskGraph, DependenciesMustPointBackwards) {
  TaskGraph g;
  const TaskId a = g.join({});
  EXPECT_THROW(g.depend(a, a), std::logic_error);
}

}  // namespace moesim
