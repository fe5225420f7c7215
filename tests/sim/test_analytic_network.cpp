// Analytic network backend: closed-form answers of the per-tick link-load model.
#include <gtest/gtest.h>

#include "core/diagnostics.hpp"
#include "sim/analytic_network.hpp"

namespace moesim {

namespace {
constexpr double kGB = 1e9;
// Relative tolerance of one tick on millisecond-scale transfers.
void expect_ms(Tick t, double ms) { EXPECT_NEAR(ticks_to_ms(t), ms, ms * 1e-9 + 1e-6); }
}  // namespace

TEST(AnalyticNetwork, SingleFlowTakesLatencyPlusBytesOverBandwidth) {
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId a = net.add_link("a->s", 100 * kGB, us_to_ticks(5));
  const LinkId b = net.add_link("s->b", 200 * kGB, us_to_ticks(3));
  Tick done = -1;
  net.start_flow({a, b}, 1 * kGB, [&] { done = sim.now(); });  // narrowest 100 GB/s: 10 ms
  EXPECT_EQ(net.active_flows(), 1u);
  sim.run();
  expect_ms(done, 10.0 + 0.008);
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_DOUBLE_EQ(net.link(a).bytes_carried, 1 * kGB);
  EXPECT_DOUBLE_EQ(net.link(b).bytes_carried, 1 * kGB);
}

TEST(AnalyticNetwork, EqualFlowsOnOneLinkEachFinishAtTheLinksDrainTime) {
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId l = net.add_link("shared", 10 * kGB, 0);
  constexpr int kFlows = 5;
  std::vector<Tick> done(kFlows, -1);
  for (int i = 0; i < kFlows; ++i) net.start_flow({l}, 1 * kGB, [&, i] { done[i] = sim.now(); });
  sim.run();
  for (Tick t : done) expect_ms(t, kFlows * 100.0);  // n · bytes / bw
  EXPECT_EQ(net.groups_priced(), 1u);
}

TEST(AnalyticNetwork, DisjointPathsAreIndependent) {
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId x = net.add_link("x", 10 * kGB, 0);
  const LinkId y = net.add_link("y", 2 * kGB, 0);
  Tick a = -1, b = -1;
  net.start_flow({x}, 1 * kGB, [&] { a = sim.now(); });
  net.start_flow({y}, 1 * kGB, [&] { b = sim.now(); });
  sim.run();
  expect_ms(a, 100.0);
  expect_ms(b, 500.0);
}

TEST(AnalyticNetwork, AFlowIsPricedAtItsBusiestLink) {
  Simulator sim;
  AnalyticNetwork net(sim);
  // A hot receiver: three senders with their own 10 GB/s uplinks into one 10 GB/s ingress.
  const LinkId in = net.add_link("ingress", 10 * kGB, 0);
  std::vector<Tick> done(3, -1);
  std::vector<LinkId> up;
  for (int i = 0; i < 3; ++i) {
    up.push_back(net.add_link("up" + std::to_string(i), 10 * kGB, 0));
    net.start_flow({up.back(), in}, 1 * kGB, [&, i] { done[i] = sim.now(); });
  }
  // A fourth flow uses only sender 0's uplink: its busiest link carries 2 GB, not the ingress's 3.
  Tick side = -1;
  net.start_flow({up[0]}, 1 * kGB, [&] { side = sim.now(); });
  sim.run();
  for (Tick t : done) expect_ms(t, 300.0);  // ingress load 3 GB / 10 GB/s
  expect_ms(side, 200.0);                    // uplink 0 load 2 GB / 10 GB/s
}

TEST(AnalyticNetwork, UnequalFlowsOnOneLinkAllFinishWhenItDrains) {
  // The documented over-estimate: max-min sharing finishes the 1 GB flow at 200 ms; the analytic
  // model prices both at the link's drain time (exact for the last one).
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId l = net.add_link("shared", 10 * kGB, 0);
  Tick small = -1, big = -1;
  net.start_flow({l}, 1 * kGB, [&] { small = sim.now(); });
  net.start_flow({l}, 3 * kGB, [&] { big = sim.now(); });
  sim.run();
  expect_ms(small, 400.0);
  expect_ms(big, 400.0);
}

TEST(AnalyticNetwork, EmptyPathCompletesAtOnceAndZeroBytesAfterLatency) {
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId l = net.add_link("l", 1 * kGB, us_to_ticks(2));
  Tick local = -1, empty = -1, loaded = -1;
  sim.at(us_to_ticks(10), [&] {
    net.start_flow({}, 1 * kGB, [&] { local = sim.now(); });
    net.start_flow({l}, 0.0, [&] { empty = sim.now(); });
    net.start_flow({l}, 1 * kGB, [&] { loaded = sim.now(); });
  });
  sim.run();
  EXPECT_EQ(local, us_to_ticks(10));
  EXPECT_EQ(empty, us_to_ticks(12));             // latency only, whatever else is on the link
  expect_ms(loaded, 1000.0 + 0.012);
}

TEST(AnalyticNetwork, GroupsAtDifferentTicksDoNotInteract) {
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId l = net.add_link("shared", 10 * kGB, 0);
  Tick first = -1, second = -1;
  net.start_flow({l}, 1 * kGB, [&] { first = sim.now(); });
  // Starts 50 ms later on the same link while the first is still in flight: priced alone.
  sim.at(ms_to_ticks(50), [&] { net.start_flow({l}, 1 * kGB, [&] { second = sim.now(); }); });
  sim.run();
  expect_ms(first, 100.0);
  expect_ms(second, 150.0);
  EXPECT_EQ(net.groups_priced(), 2u);
}

TEST(AnalyticNetwork, FlowsStartedFromACompletionJoinTheNextGroup) {
  // A completion callback starting a flow (a ring's next step) forms a new group at that tick.
  Simulator sim;
  AnalyticNetwork net(sim);
  const LinkId l = net.add_link("l", 10 * kGB, 0);
  Tick second = -1;
  net.start_flow({l}, 1 * kGB, [&] { net.start_flow({l}, 1 * kGB, [&] { second = sim.now(); }); });
  sim.run();
  expect_ms(second, 200.0);
}

TEST(AnalyticNetwork, RejectsBadLinksAndBytes) {
  Simulator sim;
  AnalyticNetwork net(sim);
  EXPECT_THROW(net.add_link("zero", 0.0, 0), std::invalid_argument);
  EXPECT_THROW(net.add_link("neg", 1.0, -1), std::invalid_argument);
  const LinkId l = net.add_link("l", 1.0, 0);
  EXPECT_THROW(net.start_flow({l}, -1.0, [] {}), std::invalid_argument);
}

TEST(AnalyticNetwork, MadeByName) {
  Simulator sim;
  EXPECT_NE(dynamic_cast<AnalyticNetwork*>(make_network("analytic", sim).get()), nullptr);
  // A registry miss (network_models()) is an input error listing the valid names.
  EXPECT_THROW(make_network("packet", sim), InputError);
}

}  // namespace moesim
