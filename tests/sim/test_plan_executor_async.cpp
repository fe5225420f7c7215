// Graphs submitted while the simulator runs: they share streams, copy engines and links; their
// callbacks fire once, at the tick their last task ends; a chooser reorders a compute stream.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "sim/flow_network.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {

namespace {
// Two GPUs joined by one 1 GB/s link each way, no latency; a compute task lasts ops[0].flops ticks.
struct Fixture {
  Simulator sim;
  FlowNetwork net{sim};
  std::vector<std::vector<std::vector<LinkId>>> routes;
  bool throw_once = false;  ///< the next compute_time call throws (to wedge a stream)
  PlanExecutor make() {
    const LinkId ab = net.add_link("0->1", 1e9, 0);
    const LinkId ba = net.add_link("1->0", 1e9, 0);
    routes = {{{}, {ab}}, {{ba}, {}}};
    return PlanExecutor(sim, net, 2,
                        {[this](const Task&, std::span<const Op> ops) {
                           if (throw_once) {
                             throw_once = false;
                             throw std::runtime_error("cost hook failed");
                           }
                           return static_cast<Tick>(ops[0].flops);
                         },
                         [this](int s, int d) -> const std::vector<LinkId>& { return routes[s][d]; }});
  }
};
Op work(double ticks) {
  Op op;
  op.flops = ticks;
  return op;
}
// A graph of one compute task on `gpu` lasting `ticks`.
TaskGraph one_compute(int gpu, double ticks) {
  TaskGraph g;
  g.compute(gpu, phase::kExperts, 0, {work(ticks)});
  return g;
}
// Records each callback: which graph, when, and its timings.
struct Done {
  int calls = 0;
  GraphId id = 0;
  Tick at = -1;
  std::vector<TaskTiming> timing;
};
PlanExecutor::GraphDone record(Done& d, Simulator& sim) {
  return [&d, &sim](GraphId id, std::vector<TaskTiming>&& t) {
    ++d.calls;
    d.id = id;
    d.at = sim.now();
    d.timing = std::move(t);
  };
}
}  // namespace

TEST(PlanExecutorAsync, SubmitFromCompletionCallbackRunsAtThatTick) {
  Fixture f;
  PlanExecutor ex = f.make();
  Done a, b;
  std::size_t in_flight_in_callback = 99;
  const GraphId ida = ex.submit(one_compute(0, 100), [&](GraphId id, std::vector<TaskTiming>&& t) {
    record(a, f.sim)(id, std::move(t));
    in_flight_in_callback = ex.in_flight();  // A is already retired
    ex.submit(one_compute(0, 50), record(b, f.sim));
  });
  EXPECT_EQ(ex.in_flight(), 1u);
  f.sim.run();
  EXPECT_EQ(ex.in_flight(), 0u);
  EXPECT_EQ(in_flight_in_callback, 0u);
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.id, ida);
  EXPECT_EQ(a.at, 100);
  ASSERT_EQ(a.timing.size(), 1u);
  EXPECT_EQ(a.timing[0].start, 0);
  EXPECT_EQ(a.timing[0].end, 100);
  ASSERT_EQ(b.calls, 1);
  EXPECT_NE(b.id, ida);  // ids are never reused
  EXPECT_EQ(b.at, 150);
  EXPECT_EQ(b.timing[0].ready, 100);
  EXPECT_EQ(b.timing[0].start, 100);
  EXPECT_EQ(b.timing[0].end, 150);
}

TEST(PlanExecutorAsync, TimedSubmitWaitsForTheSharedStream) {
  Fixture f;
  PlanExecutor ex = f.make();
  Done a, c, b;
  std::size_t in_flight_at_30 = 0, in_flight_at_120 = 0;
  ex.submit(one_compute(0, 100), [&](GraphId id, std::vector<TaskTiming>&& t) {
    record(a, f.sim)(id, std::move(t));
    // B is queued after C, which has waited on GPU 0 since tick 30: FIFO keeps C first.
    ex.submit(one_compute(0, 50), record(b, f.sim));
  });
  f.sim.at(30, [&] {
    TaskGraph g;
    g.compute(0, phase::kExperts, 0, {work(40)});  // waits for A on GPU 0
    g.compute(1, phase::kExperts, 0, {work(10)});  // GPU 1 is free
    ex.submit(std::move(g), record(c, f.sim));
    in_flight_at_30 = ex.in_flight();
  });
  f.sim.at(120, [&] { in_flight_at_120 = ex.in_flight(); });
  f.sim.run();
  EXPECT_EQ(in_flight_at_30, 2u);
  EXPECT_EQ(in_flight_at_120, 2u);  // C and B
  EXPECT_EQ(ex.in_flight(), 0u);
  ASSERT_EQ(c.calls, 1);
  EXPECT_EQ(c.timing[0].ready, 30);
  EXPECT_EQ(c.timing[0].start, 100);
  EXPECT_EQ(c.timing[0].end, 140);
  EXPECT_EQ(c.timing[1].start, 30);
  EXPECT_EQ(c.timing[1].end, 40);
  EXPECT_EQ(c.at, 140);
  ASSERT_EQ(b.calls, 1);
  EXPECT_EQ(b.timing[0].ready, 100);
  EXPECT_EQ(b.timing[0].start, 140);
  EXPECT_EQ(b.timing[0].end, 190);
  EXPECT_EQ(b.at, 190);
}

TEST(PlanExecutorAsync, CallbackFiresOnceAtTheLastTaskEnd) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  const TaskId d = g.delay(300, phase::kSchedule, -1);
  const TaskId dd[] = {d};
  const TaskId c = g.compute(1, phase::kExperts, 0, {work(50)}, dd);
  const TaskId x = g.transfer(0, 0, 1e6, phase::kDispatch, 0);  // local: ends at tick 0
  const TaskId both[] = {c, x};
  const TaskId j = g.join(both);
  Done done;
  const GraphId id = ex.submit(std::make_shared<const TaskGraph>(std::move(g)), record(done, f.sim));
  f.sim.run();
  ASSERT_EQ(done.calls, 1);
  EXPECT_EQ(done.id, id);
  EXPECT_EQ(done.at, 350);
  ASSERT_EQ(done.timing.size(), 4u);
  EXPECT_EQ(done.timing[d].end, 300);
  EXPECT_EQ(done.timing[c].ready, 300);
  EXPECT_EQ(done.timing[c].end, 350);
  EXPECT_EQ(done.timing[x].end, 0);
  EXPECT_EQ(done.timing[j].ready, 350);
  EXPECT_EQ(done.timing[j].end, 350);
}

TEST(PlanExecutorAsync, EmptyGraphCompletesAtTheCurrentTickThroughAnEvent) {
  Fixture f;
  PlanExecutor ex = f.make();
  Done now, later, joins;
  ex.submit(TaskGraph{}, record(now, f.sim));
  EXPECT_EQ(now.calls, 0);  // never inside submit
  EXPECT_EQ(ex.in_flight(), 1u);
  f.sim.at(500, [&] {
    ex.submit(TaskGraph{}, record(later, f.sim));
    TaskGraph g;
    const TaskId a = g.join({});
    const TaskId da[] = {a};
    g.join(da);
    ex.submit(std::move(g), record(joins, f.sim));
    EXPECT_EQ(later.calls + joins.calls, 0);
  });
  f.sim.run();
  EXPECT_EQ(now.calls, 1);
  EXPECT_EQ(now.at, 0);
  EXPECT_TRUE(now.timing.empty());
  EXPECT_EQ(later.calls, 1);
  EXPECT_EQ(later.at, 500);
  ASSERT_EQ(joins.calls, 1);
  EXPECT_EQ(joins.at, 500);
  ASSERT_EQ(joins.timing.size(), 2u);
  EXPECT_EQ(joins.timing[1].end, 500);
  EXPECT_EQ(ex.in_flight(), 0u);
}

TEST(PlanExecutorAsync, LifoChooserReordersTheComputeStream) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  const TaskId a = g.compute(0, phase::kExperts, 0, {work(100)});  // starts at once: no choice
  const TaskId b = g.compute(0, phase::kExperts, 0, {work(10)});
  const TaskId c = g.compute(0, phase::kExperts, 0, {work(20)});
  const TaskId d = g.compute(0, phase::kExperts, 0, {work(30)});
  std::vector<std::vector<TaskId>> seen;
  ex.set_compute_chooser([&](int gpu, std::span<const ReadyTask> waiting) {
    EXPECT_EQ(gpu, 0);
    std::vector<TaskId> ids;
    for (const ReadyTask& r : waiting) {
      EXPECT_EQ(r.ready, 0);
      EXPECT_EQ(r.task->kind, TaskKind::kCompute);
      ids.push_back(r.id);
    }
    seen.push_back(ids);
    return waiting.size() - 1;
  });
  const auto t = ex.run(g);
  EXPECT_EQ(t[a].end, 100);
  EXPECT_EQ(t[d].start, 100);
  EXPECT_EQ(t[d].end, 130);
  EXPECT_EQ(t[c].start, 130);
  EXPECT_EQ(t[c].end, 150);
  EXPECT_EQ(t[b].start, 150);
  EXPECT_EQ(t[b].end, 160);
  // Consulted only with a real choice; the rest keep their ready order.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<TaskId>{b, c, d}));
  EXPECT_EQ(seen[1], (std::vector<TaskId>{b, c}));

  ex.set_compute_chooser(nullptr);  // back to FIFO
  const Tick t0 = f.sim.now();
  const auto fifo = ex.run(g);
  EXPECT_EQ(fifo[b].start - t0, 100);
  EXPECT_EQ(fifo[d].end - t0, 160);
}

TEST(PlanExecutorAsync, ChooserSeesTasksOfEveryGraphOnItsGpu) {
  Fixture f;
  PlanExecutor ex = f.make();
  std::vector<GraphId> graphs;
  ex.set_compute_chooser([&](int, std::span<const ReadyTask> waiting) {
    for (const ReadyTask& r : waiting) graphs.push_back(r.graph);
    return std::size_t{1};  // the second-oldest
  });
  Done x, y, z;
  const GraphId gx = ex.submit(one_compute(0, 100), record(x, f.sim));
  const GraphId gy = ex.submit(one_compute(0, 10), record(y, f.sim));
  const GraphId gz = ex.submit(one_compute(0, 20), record(z, f.sim));
  f.sim.run();
  EXPECT_EQ(graphs, (std::vector<GraphId>{gy, gz}));
  EXPECT_EQ(x.at, 100);
  EXPECT_EQ(z.timing[0].start, 100);
  EXPECT_EQ(z.at, 120);
  EXPECT_EQ(y.timing[0].start, 120);
  EXPECT_EQ(y.at, 130);
  (void)gx;
}

TEST(PlanExecutorAsync, OutOfRangeChoiceIsALogicError) {
  Fixture f;
  PlanExecutor ex = f.make();
  TaskGraph g;
  for (int i = 0; i < 3; ++i) g.compute(0, phase::kExperts, 0, {work(10)});
  ex.set_compute_chooser([](int, std::span<const ReadyTask> waiting) { return waiting.size(); });
  try {
    ex.run(g);
    FAIL() << "expected a logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("chooser"), std::string::npos) << e.what();
  }
}

TEST(PlanExecutorAsync, RunStillDetectsAStalledPlan) {
  Fixture f;
  PlanExecutor ex = f.make();
  // A failing cost hook leaves GPU 0's stream held, so a later plan on it can never run.
  f.throw_once = true;
  EXPECT_THROW(ex.run(one_compute(0, 10)), std::runtime_error);
  TaskGraph g;
  const TaskId a = g.compute(0, phase::kExperts, 0, {work(10)});
  const TaskId da[] = {a};
  g.delay(5, phase::kSchedule, -1, da);
  g.delay(7, phase::kSchedule, -1);  // independent: runs
  try {
    ex.run(g);
    FAIL() << "expected a stall";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "plan stalled: 2 tasks never ran");
  }
}

TEST(PlanExecutorAsync, GraphsShareALinkMaxMinFairly) {
  Fixture f;
  PlanExecutor ex = f.make();
  auto one_flow = [] {
    TaskGraph g;
    g.transfer(0, 1, 1e9, phase::kDispatch, 0);  // 1 GB on the 1 GB/s link 0->1
    return g;
  };
  Done p, q, r, s;
  ex.submit(one_flow(), record(p, f.sim));
  ex.submit(one_flow(), record(q, f.sim));
  f.sim.run();
  // Together from t=0: half rate each, both done at 2 s.
  EXPECT_NEAR(static_cast<double>(p.at), 2.0 * kPsPerS, 4.0);
  EXPECT_NEAR(static_cast<double>(q.at), 2.0 * kPsPerS, 4.0);

  // Staggered: r alone for 0.5 s (0.5 GB), then both at 0.5 GB/s: r ends at 1.5 s with s at
  // 0.5 GB sent; s finishes its last 0.5 GB alone by 2.0 s.
  const Tick t0 = f.sim.now();
  ex.submit(one_flow(), record(r, f.sim));
  f.sim.at(t0 + kPsPerS / 2, [&] { ex.submit(one_flow(), record(s, f.sim)); });
  f.sim.run();
  EXPECT_NEAR(static_cast<double>(r.at - t0), 1.5 * kPsPerS, 4.0);
  EXPECT_NEAR(static_cast<double>(s.at - t0), 2.0 * kPsPerS, 4.0);
}

TEST(PlanExecutorAsync, SameInputsGiveSameTimings) {
  auto scenario = [] {
    Fixture f;
    PlanExecutor ex = f.make();
    std::vector<Done> done(6);
    for (int i = 0; i < 6; ++i) {
      f.sim.at(7 * i, [&, i] {
        TaskGraph g;
        const TaskId c = g.compute(i % 2, phase::kExperts, 0, {work(10.0 + i)});
        const TaskId dc[] = {c};
        g.transfer(i % 2, 1 - i % 2, 1e6 * (i + 1), phase::kDispatch, 0, dc);
        ex.submit(std::move(g), record(done[static_cast<std::size_t>(i)], f.sim));
      });
    }
    f.sim.run();
    std::vector<Tick> ends;
    for (const Done& d : done)
      for (const TaskTiming& t : d.timing) ends.push_back(t.end);
    return ends;
  };
  const auto first = scenario();
  EXPECT_EQ(first.size(), 12u);
  EXPECT_EQ(first, scenario());
}

}  // namespace moesim
