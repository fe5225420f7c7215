// Event ordering: (tick, priority, insertion) is a total order, and causality is enforced.
#include <gtest/gtest.h>

#include <vector>

#include "sim/simulator.hpp"

namespace moesim {

TEST(EventQueue, EqualTicksRunByPriorityThenInsertion) {
  Simulator sim;
  std::vector<int> order;
  sim.at(10, [&] { order.push_back(3); }, EventPriority::kStart);
  sim.at(10, [&] { order.push_back(1); }, EventPriority::kCompletion);
  sim.at(10, [&] { order.push_back(2); }, EventPriority::kDefault);
  sim.at(10, [&] { order.push_back(4); }, EventPriority::kStart);
  sim.at(5, [&] { order.push_back(0); }, EventPriority::kStats);
  sim.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(sim.now(), 10);
  EXPECT_EQ(sim.events_run(), 5u);
}

TEST(EventQueue, ManyEventsComeOutSorted) {
  Simulator sim;
  std::vector<Tick> seen;
  // A scrambled but deterministic set of ticks.
  for (int i = 0; i < 1000; ++i) {
    const Tick t = (i * 7919) % 1009;
    sim.at(t, [&seen, &sim] { seen.push_back(sim.now()); });
  }
  sim.run();
  ASSERT_EQ(seen.size(), 1000u);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LE(seen[i - 1], seen[i]);
}

TEST(EventQueue, EventsScheduledFromCallbacksAtSameTickRunAfter) {
  Simulator sim;
  std::vector<int> order;
  sim.at(1, [&] {
    order.push_back(1);
    sim.after(0, [&] { order.push_back(3); });
  });
  sim.at(1, [&] { order.push_back(2); });
  sim.run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(EventQueue, SchedulingInThePastIsACausalityError) {
  Simulator sim;
  sim.at(100, [&] { EXPECT_THROW(sim.at(50, [] {}), CausalityError); });
  sim.run();
}

TEST(EventQueue, RunStopsAtLimit) {
  Simulator sim;
  int ran = 0;
  sim.at(10, [&] { ++ran; });
  sim.at(20, [&] { ++ran; });
  EXPECT_EQ(sim.run(15), 1u);
  EXPECT_EQ(ran, 1);
  sim.run();
  EXPECT_EQ(ran, 2);
}

}  // namespace moesim
