// PlanExecutor::submit_alone replays a graph that runs alone in a loop of its own: every timing,
// every delivery tick, the order of deliveries among the simulator's other events, and the
// events counted must be those submit() gives. Random graphs of joins, delays, collectives and
// compute tasks with many ties (zero and equal durations, tasks queueing on a GPU), chained the
// way a serving loop chains its steps, with and without a compute chooser.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hardware/phase.hpp"
#include "sim/analytic_network.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

namespace {

constexpr int kGpus = 3;

Op work(double ticks) {
  Op op;
  op.flops = ticks;
  return op;
}

/// A random plan: each task depends on up to three earlier ones (or none: another root). Durations
/// come from a few small values, so that tasks tie at a tick and queue on a GPU's stream.
TaskGraph random_plan(std::mt19937_64& rng, bool with_transfer) {
  TaskGraph g;
  const int n = 1 + static_cast<int>(rng() % 40);
  const Tick lengths[] = {0, 1, 2, 5, 5, 10};
  for (int i = 0; i < n; ++i) {
    std::vector<TaskId> deps;
    const int k = i == 0 ? 0 : static_cast<int>(rng() % 4);
    for (int d = 0; d < k; ++d) deps.push_back(static_cast<TaskId>(rng() % static_cast<std::uint64_t>(i)));
    const Tick len = lengths[rng() % 6];
    const int gpu = static_cast<int>(rng() % kGpus);
    const auto layer = static_cast<int>(rng() % 4);
    TaskId id = 0;
    switch (rng() % 5) {
      case 0:
        id = g.join(deps, phase::kOther, layer);
        break;
      case 1:
        id = g.delay(len, phase::kOther, layer, deps, gpu);
        break;
      case 2:
        id = g.collective(gpu, len, 1.0, 0.0, phase::kDispatch, layer, deps);
        break;
      default:
        id = g.compute(gpu, phase::kExperts, layer, {work(static_cast<double>(len))}, deps);
        break;
    }
    (void)id;
  }
  if (rng() % 3 == 0) g.set_repeat(0, static_cast<TaskId>(g.size()), 2);
  if (with_transfer) g.transfer(0, 1, 1e6, phase::kDispatch, 0, {});
  return g;
}

/// What a run gives: each graph's delivery tick and timings, the order in which deliveries and
/// the background events ran, and the simulator's event count.
struct Outcome {
  std::vector<Tick> delivered;
  std::vector<std::vector<TaskTiming>> timing;
  std::vector<std::string> order;
  std::uint64_t events = 0;
};

bool same_timings(const std::vector<TaskTiming>& a, const std::vector<TaskTiming>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].ready != b[i].ready || a[i].start != b[i].start || a[i].end != b[i].end) return false;
  return true;
}

/// `graphs` random plans run one after another (each submitted from the last one's delivery, or
/// at tick 0), beside background events at every priority but kCompletion on ticks the plans
/// use; `alone` submits them with submit_alone.
Outcome run(std::uint64_t seed, bool alone, bool chooser, bool transfers) {
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId ab = net.add_link("0->1", 1e9, 0);
  const std::vector<LinkId> route{ab}, none;
  PlanExecutor ex(sim, net, kGpus,
                  {[](const Task&, std::span<const Op> ops) { return static_cast<Tick>(ops[0].flops); },
                   [&](int s, int d) -> const std::vector<LinkId>& { return s == 0 && d == 1 ? route : none; }});
  if (chooser) {
    // Latest-ready first, ties to the highest layer: a policy that reorders.
    ex.set_compute_chooser([](int, std::span<const ReadyTask> waiting) {
      std::size_t best = 0;
      for (std::size_t i = 1; i < waiting.size(); ++i)
        if (waiting[i].task->layer >= waiting[best].task->layer) best = i;
      return best;
    });
  }
  std::mt19937_64 rng(seed);
  Outcome out;
  const int graphs = 12;
  for (int t = 0; t < 200; t += 3) {
    sim.at(t, [&out, t] { out.order.push_back("default@" + std::to_string(t)); });
    sim.at(t, [&out, t] { out.order.push_back("start@" + std::to_string(t)); }, EventPriority::kStart);
  }
  std::function<void(int)> submit_next = [&](int i) {
    if (i == graphs) return;
    auto plan = std::make_shared<const TaskGraph>(random_plan(rng, transfers && i % 4 == 3));
    auto done = [&, i](GraphId, std::vector<TaskTiming>&& timing) {
      out.delivered.push_back(sim.now());
      out.timing.push_back(std::move(timing));
      out.order.push_back("graph " + std::to_string(i) + "@" + std::to_string(sim.now()));
      submit_next(i + 1);
    };
    if (alone)
      ex.submit_alone(std::move(plan), std::move(done));
    else
      ex.submit(std::move(plan), std::move(done));
  };
  sim.at(0, [&] { submit_next(0); });
  sim.run();
  out.events = sim.events_run();
  return out;
}

}  // namespace

TEST(PlanReplay, AloneGivesWhatSubmitGives) {
  for (std::uint64_t seed = 1; seed <= 300; ++seed)
    for (const bool chooser : {false, true}) {
      const bool transfers = seed % 5 == 0;  // some plans fall back to submit()
      const Outcome want = run(seed, false, chooser, transfers);
      const Outcome got = run(seed, true, chooser, transfers);
      ASSERT_EQ(got.delivered, want.delivered) << "seed " << seed << " chooser " << chooser;
      ASSERT_EQ(got.timing.size(), want.timing.size());
      for (std::size_t i = 0; i < want.timing.size(); ++i)
        ASSERT_TRUE(same_timings(got.timing[i], want.timing[i])) << "seed " << seed << " graph " << i;
      ASSERT_EQ(got.order, want.order) << "seed " << seed;
      ASSERT_EQ(got.events, want.events) << "seed " << seed;
    }
}

TEST(PlanReplay, AGraphBesideOneSubmittedAloneIsRefused) {
  Simulator sim;
  AnalyticNetwork net(sim);
  PlanExecutor ex(sim, net, 1,
                  {[](const Task&, std::span<const Op>) { return Tick{5}; },
                   [](int, int) -> const std::vector<LinkId>& {
                     static const std::vector<LinkId> none;
                     return none;
                   }});
  TaskGraph a;
  a.compute(0, phase::kExperts, 0, {work(5)});
  ex.submit_alone(std::make_shared<const TaskGraph>(std::move(a)), [](GraphId, std::vector<TaskTiming>&&) {});
  TaskGraph b;
  b.compute(0, phase::kExperts, 0, {work(5)});
  EXPECT_THROW(ex.submit(std::move(b), [](GraphId, std::vector<TaskTiming>&&) {}), std::logic_error);
}

TEST(PlanReplay, OutOfRangeDurationsFailAsTheSimulatorDoes) {
  Simulator sim;
  AnalyticNetwork net(sim);
  PlanExecutor ex(sim, net, 1,
                  {[](const Task&, std::span<const Op>) { return kTickLimit; },
                   [](int, int) -> const std::vector<LinkId>& {
                     static const std::vector<LinkId> none;
                     return none;
                   }});
  TaskGraph g;
  const TaskId a = g.compute(0, phase::kExperts, 0, {work(1)});
  const TaskId deps[] = {a};
  g.compute(0, phase::kExperts, 0, {work(1)}, deps);
  EXPECT_THROW(ex.submit_alone(std::make_shared<const TaskGraph>(std::move(g)), [](GraphId, std::vector<TaskTiming>&&) {}),
               TimeRangeError);
}

}  // namespace moesim
