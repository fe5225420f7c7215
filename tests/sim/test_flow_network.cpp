// Flow-level network: closed-form answers for max-min fair sharing.
#include <gtest/gtest.h>

#include "sim/flow_network.hpp"

namespace moesim {

namespace {
constexpr double kGB = 1e9;
// Relative tolerance of one tick on millisecond-scale transfers.
void expect_ms(Tick t, double ms) { EXPECT_NEAR(ticks_to_ms(t), ms, ms * 1e-9 + 1e-6); }
}  // namespace

TEST(FlowNetwork, SingleFlowTakesBytesOverBandwidthPlusLatency) {
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId l = net.add_link("a->b", 100 * kGB, us_to_ticks(5));
  Tick done = -1;
  net.start_flow({l}, 1 * kGB, [&] { done = sim.now(); });  // 1 GB at 100 GB/s = 10 ms
  sim.run();
  expect_ms(done, 10.0 + 0.005);
  EXPECT_DOUBLE_EQ(net.link(l).bytes_carried, 1 * kGB);
}

TEST(FlowNetwork, TwoFlowsShareALinkEqually) {
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId l = net.add_link("shared", 10 * kGB, 0);
  Tick a = -1, b = -1;
  net.start_flow({l}, 1 * kGB, [&] { a = sim.now(); });
  net.start_flow({l}, 1 * kGB, [&] { b = sim.now(); });
  sim.run();
  expect_ms(a, 200.0);  // each gets 5 GB/s
  expect_ms(b, 200.0);
}

TEST(FlowNetwork, ShortFlowLeavingSpeedsUpTheLongOne) {
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId l = net.add_link("shared", 10 * kGB, 0);
  Tick small = -1, big = -1;
  net.start_flow({l}, 1 * kGB, [&] { small = sim.now(); });
  net.start_flow({l}, 3 * kGB, [&] { big = sim.now(); });
  sim.run();
  // Both at 5 GB/s until 1 GB is done (200 ms); the rest 2 GB at 10 GB/s (200 ms).
  expect_ms(small, 200.0);
  expect_ms(big, 400.0);
}

TEST(FlowNetwork, MaxMinFairnessGivesUnusedShareToOthers) {
  Simulator sim;
  FlowNetwork net(sim);
  // Flow X crosses a thin link (2 GB/s) and the shared link; flow Y only the shared link (10 GB/s).
  const LinkId thin = net.add_link("thin", 2 * kGB, 0);
  const LinkId shared = net.add_link("shared", 10 * kGB, 0);
  Tick x = -1, y = -1;
  net.start_flow({thin, shared}, 2 * kGB, [&] { x = sim.now(); });
  net.start_flow({shared}, 8 * kGB, [&] { y = sim.now(); });
  sim.run();
  // X is capped at 2 GB/s by the thin link; Y gets the remaining 8 GB/s: both take 1 s.
  expect_ms(x, 1000.0);
  expect_ms(y, 1000.0);
}

TEST(FlowNetwork, LateFlowJoinsAndRatesAreRecomputed) {
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId l = net.add_link("l", 10 * kGB, 0);
  Tick first = -1, second = -1;
  net.start_flow({l}, 2 * kGB, [&] { first = sim.now(); });
  sim.at(100 * kPsPerMs, [&] { net.start_flow({l}, 1 * kGB, [&] { second = sim.now(); }); });
  sim.run();
  // 0-100 ms: first alone moves 1 GB. Then both at 5 GB/s: each 1 GB left → both end at 300 ms.
  expect_ms(first, 300.0);
  expect_ms(second, 300.0);
}

TEST(FlowNetwork, EmptyPathAndZeroBytesCompleteWithoutTime) {
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId l = net.add_link("l", 1 * kGB, us_to_ticks(1));
  Tick local = -1, empty = -1;
  net.start_flow({}, 5 * kGB, [&] { local = sim.now(); });
  net.start_flow({l}, 0.0, [&] { empty = sim.now(); });
  sim.run();
  EXPECT_EQ(local, 0);
  EXPECT_EQ(empty, us_to_ticks(1));  // only the hop latency
}

TEST(FlowNetwork, RejectsNonPositiveBandwidth) {
  Simulator sim;
  FlowNetwork net(sim);
  EXPECT_THROW(net.add_link("bad", 0.0, 0), std::invalid_argument);
  EXPECT_THROW(net.add_link("bad", -1.0, 0), std::invalid_argument);
}

TEST(FlowNetwork, HotReceiverIsTheBottleneck) {
  // Four senders each with their own uplink into a switch, one shared downlink to the receiver:
  // the receiver's link is the bottleneck by construction.
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId down = net.add_link("switch->hot", 10 * kGB, 0);
  Tick last = 0;
  for (int i = 0; i < 4; ++i) {
    const LinkId up = net.add_link("src->switch", 10 * kGB, 0);
    net.start_flow({up, down}, 1 * kGB, [&] { last = std::max(last, sim.now()); });
  }
  sim.run();
  expect_ms(last, 400.0);  // 4 GB through one 10 GB/s link
}

// The completion window (hardware.flow_completion_window_us): 1 GB, 1.001 GB and 3 GB on one
// 10 GB/s link. Exact: all at 10/3 GB/s until the first ends (300 ms), the second's last 1 MB at
// 5 GB/s (300.2 ms), the third then alone (5.001 GB in all: 500.1 ms). With a 1 ms window the
// second is due within it, so it ends with the first at 300 ms, its last MB counted delivered,
// and the third's 2 GB left take 200 ms alone: 500 ms, one recomputation fewer.
TEST(FlowNetwork, CompletionWindowEndsFlowsDueWithinItTogether) {
  struct Ends {
    Tick a = -1, b = -1, c = -1;
    std::uint64_t reallocations = 0;
    double carried = 0.0;
  };
  auto run = [](Tick window) {
    Simulator sim;
    FlowNetwork net(sim, window);
    const LinkId l = net.add_link("shared", 10 * kGB, 0);
    Ends e;
    net.start_flow({l}, 1 * kGB, [&] { e.a = sim.now(); });
    net.start_flow({l}, 1.001 * kGB, [&] { e.b = sim.now(); });
    net.start_flow({l}, 3 * kGB, [&] { e.c = sim.now(); });
    sim.run();
    e.reallocations = net.reallocations();
    e.carried = net.link(l).bytes_carried;
    return e;
  };
  const Ends exact = run(1);
  expect_ms(exact.a, 300.0);
  expect_ms(exact.b, 300.2);
  expect_ms(exact.c, 500.1);
  const Ends windowed = run(ms_to_ticks(1.0));
  expect_ms(windowed.a, 300.0);
  EXPECT_EQ(windowed.b, windowed.a);
  expect_ms(windowed.c, 500.0);
  EXPECT_EQ(windowed.reallocations + 1, exact.reallocations);
  EXPECT_DOUBLE_EQ(windowed.carried, exact.carried);  // every flow's bytes count as carried
  // A window shorter than the gap between completions changes nothing.
  const Ends narrow = run(us_to_ticks(100.0));
  EXPECT_EQ(narrow.a, exact.a);
  EXPECT_EQ(narrow.b, exact.b);
  EXPECT_EQ(narrow.c, exact.c);
  EXPECT_EQ(narrow.reallocations, exact.reallocations);
}

}  // namespace moesim
