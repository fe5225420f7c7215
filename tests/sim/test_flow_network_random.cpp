// Randomized check of the flow network: the incremental allocator (refills only the rounds a
// change can affect, coalesces identical flows) against a verbatim copy of the plain global
// progressive filling it replaced, on random topologies and flow sets. Max-min rates are unique,
// so the rates must agree to floating rounding and the completion ticks of whole scenarios to a
// tick and 1e-8 of the time; and at every completion, the incremental rates must equal, bit for
// bit, those of a filling from scratch of the flows still active.
#include <gtest/gtest.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <functional>
#include <stdexcept>

#include "core/rng.hpp"
#include "sim/flow_network.hpp"

namespace moesim {
namespace {

constexpr double kRelativeEpsilon = 1e-9;

/// The reference: FlowNetwork as it was before the fast allocator (global refill of every active
/// flow, linear bottleneck scan), copied unchanged but for the class name.
class RefFlowNetwork {
 public:
  using DoneCallback = std::function<void()>;
  explicit RefFlowNetwork(Simulator& sim) : sim_(sim) {}
  LinkId add_link(std::string name, double bandwidth_Bps, Tick latency);
  FlowId start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done);
  double flow_rate_Bps(FlowId id) const;
  const Link& link(LinkId id) const { return links_[id]; }

 private:
  struct Flow {
    FlowId id;
    std::vector<LinkId> path;
    double bytes;
    double remaining;
    double rate = 0.0;
    DoneCallback on_done;
  };
  void activate(Flow flow);
  void request_reallocate();
  void advance_to_now();
  void reallocate();
  void on_completion_check(std::uint64_t generation);

  Simulator& sim_;
  std::vector<Link> links_;
  std::vector<Flow> active_;
  Tick last_update_ = 0;
  FlowId next_id_ = 0;
  bool reallocate_pending_ = false;
  std::uint64_t generation_ = 0;
  std::uint64_t reallocations_ = 0;
  std::vector<double> cap_left_;
  std::vector<std::uint32_t> unfrozen_;
  std::vector<std::uint32_t> link_start_, link_fill_, link_flows_;
};

LinkId RefFlowNetwork::add_link(std::string name, double bandwidth_Bps, Tick latency) {
  if (!(bandwidth_Bps > 0.0)) throw std::invalid_argument("link '" + name + "' needs bandwidth > 0");
  if (latency < 0) throw std::invalid_argument("link '" + name + "' needs latency >= 0");
  links_.push_back(Link{std::move(name), bandwidth_Bps, latency, 0.0});
  return static_cast<LinkId>(links_.size() - 1);
}

FlowId RefFlowNetwork::start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done) {
  if (bytes < 0.0 || !std::isfinite(bytes)) throw std::invalid_argument("flow bytes must be >= 0");
  const FlowId id = next_id_++;
  if (path.empty()) {
    // Local: nothing crosses a link. Complete in this tick, after the caller returns.
    sim_.after(0, std::move(on_done), EventPriority::kCompletion);
    return id;
  }
  Tick latency = 0;
  for (LinkId l : path) {
    assert(l < links_.size());
    latency += links_[l].latency;
  }
  Flow f{id, path, bytes, bytes, 0.0, std::move(on_done)};
  sim_.after(latency, [this, f = std::move(f)]() mutable { activate(std::move(f)); });
  return id;
}

double RefFlowNetwork::flow_rate_Bps(FlowId id) const {
  for (const auto& f : active_)
    if (f.id == id) return f.rate * static_cast<double>(kPsPerS);
  return 0.0;
}

void RefFlowNetwork::activate(Flow flow) {
  advance_to_now();
  if (flow.bytes <= 0.0) {
    sim_.after(0, std::move(flow.on_done), EventPriority::kCompletion);
    return;
  }
  active_.push_back(std::move(flow));
  request_reallocate();
}

void RefFlowNetwork::request_reallocate() {
  if (reallocate_pending_) return;
  reallocate_pending_ = true;
  // After every other event of this tick, so simultaneous starts and ends cost one recomputation.
  sim_.after(0, [this] {
    reallocate_pending_ = false;
    reallocate();
  }, EventPriority::kReallocate);
}

void RefFlowNetwork::advance_to_now() {
  const Tick now = sim_.now();
  const double dt = static_cast<double>(now - last_update_);
  if (dt > 0.0) {
    for (auto& f : active_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
  }
  last_update_ = now;
}

void RefFlowNetwork::reallocate() {
  advance_to_now();
  ++reallocations_;
  ++generation_;
  if (active_.empty()) return;

  // Progressive filling: repeatedly find the link whose remaining capacity per unfrozen flow is
  // smallest, give that share to all its unfrozen flows, and remove them from the problem.
  // Flows are indexed by the links they cross (CSR, flows in active order), so a round visits
  // only the bottleneck's flows; the arithmetic and its order are those of a full scan.
  cap_left_.assign(links_.size(), 0.0);
  unfrozen_.assign(links_.size(), 0);
  std::vector<LinkId> touched;
  for (const auto& f : active_) {
    for (LinkId l : f.path) {
      if (unfrozen_[l]++ == 0) {
        cap_left_[l] = links_[l].bandwidth_Bps / static_cast<double>(kPsPerS);
        touched.push_back(l);
      }
    }
  }
  link_start_.assign(links_.size() + 1, 0);
  for (LinkId l : touched) link_start_[l + 1] = unfrozen_[l];
  for (std::size_t l = 0; l < links_.size(); ++l) link_start_[l + 1] += link_start_[l];
  link_flows_.resize(link_start_.back());
  link_fill_.assign(link_start_.begin(), link_start_.end() - 1);
  for (std::uint32_t i = 0; i < active_.size(); ++i)
    for (LinkId l : active_[i].path) link_flows_[link_fill_[l]++] = i;
  std::vector<char> frozen(active_.size(), 0);
  std::size_t left = active_.size();
  while (left > 0) {
    LinkId bottleneck = 0;
    double share = std::numeric_limits<double>::infinity();
    for (LinkId l : touched) {
      if (unfrozen_[l] == 0) continue;
      const double s = cap_left_[l] / static_cast<double>(unfrozen_[l]);
      if (s < share) {
        share = s;
        bottleneck = l;
      }
    }
    assert(std::isfinite(share));
    for (std::uint32_t k = link_start_[bottleneck]; k < link_start_[bottleneck + 1]; ++k) {
      const std::uint32_t i = link_flows_[k];
      if (frozen[i]) continue;
      auto& f = active_[i];
      f.rate = share;
      frozen[i] = 1;
      --left;
      for (LinkId l : f.path) {
        cap_left_[l] = std::max(0.0, cap_left_[l] - share);
        --unfrozen_[l];
      }
    }
  }

  // One event for the earliest completion; later ones are rescheduled by the next reallocation.
  Tick earliest = kTickMax;
  for (const auto& f : active_) {
    const double ticks = f.remaining / f.rate;
    const Tick t = sim_.now() + std::max<Tick>(1, static_cast<Tick>(std::ceil(ticks)));
    earliest = std::min(earliest, t);
  }
  const std::uint64_t gen = generation_;
  sim_.at(earliest, [this, gen] { on_completion_check(gen); }, EventPriority::kCompletion);
}

void RefFlowNetwork::on_completion_check(std::uint64_t generation) {
  if (generation != generation_) return;  // superseded by a later reallocation
  advance_to_now();
  std::vector<DoneCallback> done;
  auto finished = [](const Flow& f) {
    return f.remaining <= std::max(1e-6, f.bytes * kRelativeEpsilon) || f.remaining <= f.rate;
  };
  for (auto& f : active_) {
    if (!finished(f)) continue;
    for (LinkId l : f.path) links_[l].bytes_carried += f.bytes;
    done.push_back(std::move(f.on_done));
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), finished), active_.end());
  request_reallocate();
  for (auto& cb : done) cb();
}


// ---------------------------------------------------------------------------------------------

constexpr double kGB = 1e9;

/// A random network: link capacities 1-400 GB/s (some equal, to exercise ties), latencies
/// 0-3 us, and flows on random simple paths of 1-5 links.
struct RandomCase {
  std::vector<double> bandwidth;
  std::vector<Tick> latency;
  struct F {
    std::vector<LinkId> path;
    double bytes;
    Tick start;
  };
  std::vector<F> flows;
};

RandomCase make_case(Rng& rng, bool static_start) {
  RandomCase c;
  const int links = 1 + static_cast<int>(rng.below(40));
  for (int l = 0; l < links; ++l) {
    // Half the links on a few round capacities so equal shares (ties) are common.
    c.bandwidth.push_back(rng.below(2) ? (1.0 + static_cast<double>(rng.below(4))) * 100 * kGB
                                       : rng.uniform(1.0, 400.0) * kGB);
    c.latency.push_back(static_start ? 0 : static_cast<Tick>(rng.below(4)) * us_to_ticks(1));
  }
  const int flows = 1 + static_cast<int>(rng.below(120));
  for (int i = 0; i < flows; ++i) {
    RandomCase::F f;
    const int hops = 1 + static_cast<int>(rng.below(static_cast<std::uint64_t>(std::min(5, links))));
    while (static_cast<int>(f.path.size()) < hops) {
      const auto l = static_cast<LinkId>(rng.below(static_cast<std::uint64_t>(links)));
      if (std::find(f.path.begin(), f.path.end(), l) == f.path.end()) f.path.push_back(l);
    }
    // Sizes from a few values, so equal flows (coalescable) appear as well as skew.
    f.bytes = rng.below(3) == 0 ? 1e6 * static_cast<double>(1 + rng.below(3)) : rng.uniform(1e3, 5e7);
    f.start = static_start ? 0 : static_cast<Tick>(rng.below(6)) * us_to_ticks(20);
    c.flows.push_back(std::move(f));
  }
  return c;
}

/// Builds the case on a network type, starts every flow at its tick, records completion ticks.
template <class Net>
struct Driver {
  Simulator sim;
  Net net{sim};
  std::vector<FlowId> ids;
  std::vector<Tick> done;
  explicit Driver(const RandomCase& c) : done(c.flows.size(), -1) {
    for (std::size_t l = 0; l < c.bandwidth.size(); ++l) net.add_link("l", c.bandwidth[l], c.latency[l]);
    ids.resize(c.flows.size());
    for (std::size_t i = 0; i < c.flows.size(); ++i)
      sim.at(c.flows[i].start, [this, &c, i] {
        ids[i] = net.start_flow(c.flows[i].path, c.flows[i].bytes, [this, i] { done[i] = sim.now(); });
      });
  }
};

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

/// Completion ticks agree to a tick plus 1e-8 of the time: the reference ends a flow when less
/// than a tick's bytes (or 1e-9 of its bytes) are left, the incremental network at its computed
/// completion tick, and a one-tick shift early in a run moves later flows' rates by as little.
bool close_ticks(Tick a, Tick b) {
  return std::abs(a - b) <= 1 + static_cast<Tick>(1e-8 * static_cast<double>(std::max(a, b)));
}

TEST(FlowNetworkRandom, RatesMatchGlobalProgressiveFilling) {
  Rng rng(20240611);
  for (int round = 0; round < 300; ++round) {
    const RandomCase c = make_case(rng, /*static_start=*/true);
    Driver<FlowNetwork> fast(c);
    Driver<RefFlowNetwork> ref(c);
    // Everything starts at tick 0 with no latency: one refill at tick 0, before any completion.
    fast.sim.run(0);
    ref.sim.run(0);
    for (std::size_t i = 0; i < c.flows.size(); ++i) {
      const double a = fast.net.flow_rate_Bps(fast.ids[i]);
      const double b = ref.net.flow_rate_Bps(ref.ids[i]);
      ASSERT_GT(b, 0.0);
      ASSERT_TRUE(close(a, b)) << "case " << round << " flow " << i << ": " << a << " vs " << b;
    }
  }
}

TEST(FlowNetworkRandom, CompletionTicksMatchReferenceRun) {
  Rng rng(77);
  for (int round = 0; round < 300; ++round) {
    const RandomCase c = make_case(rng, /*static_start=*/false);
    Driver<FlowNetwork> fast(c);
    Driver<RefFlowNetwork> ref(c);
    fast.sim.run();
    ref.sim.run();
    for (std::size_t i = 0; i < c.flows.size(); ++i) {
      ASSERT_GE(fast.done[i], 0);
      ASSERT_TRUE(close_ticks(fast.done[i], ref.done[i])) << "case " << round << " flow " << i;
    }
    for (std::size_t l = 0; l < c.bandwidth.size(); ++l)
      ASSERT_TRUE(close(fast.net.link(static_cast<LinkId>(l)).bytes_carried,
                        ref.net.link(static_cast<LinkId>(l)).bytes_carried));
    EXPECT_EQ(fast.net.active_flows(), 0u);
  }
}

TEST(FlowNetworkRandom, CoalescedFlowsFinishExactlyLikeSeparateOnes) {
  // Groups of equal flows (same path, bytes, start) beside unequal ones on shared links: the
  // fast network coalesces each group into one entry; the reference keeps them separate. Copies
  // finish at the very tick of their original, and everything within a tick of the reference.
  Rng rng(5);
  for (int round = 0; round < 100; ++round) {
    RandomCase c = make_case(rng, /*static_start=*/false);
    const std::size_t n = c.flows.size();
    std::vector<std::size_t> original;
    for (std::size_t i = 0; i < n; ++i) {
      const int copies = static_cast<int>(rng.below(4));
      for (int k = 0; k < copies; ++k) {
        c.flows.push_back(c.flows[i]);
        original.push_back(i);
      }
    }
    Driver<FlowNetwork> fast(c);
    Driver<RefFlowNetwork> ref(c);
    fast.sim.run();
    ref.sim.run();
    for (std::size_t i = 0; i < c.flows.size(); ++i)
      ASSERT_TRUE(close_ticks(fast.done[i], ref.done[i])) << "case " << round << " flow " << i;
    for (std::size_t k = 0; k < original.size(); ++k)
      ASSERT_EQ(fast.done[n + k], fast.done[original[k]]) << "case " << round;
  }
}

/// Rates of `active` flows of case `c` from a filling from scratch in a fresh network.
std::vector<double> fresh_rates(const RandomCase& c, const std::vector<std::size_t>& active) {
  Simulator sim;
  FlowNetwork net(sim);
  for (std::size_t l = 0; l < c.bandwidth.size(); ++l) net.add_link("l", c.bandwidth[l], 0);
  std::vector<FlowId> ids;
  for (std::size_t i : active) ids.push_back(net.start_flow(c.flows[i].path, c.flows[i].bytes, [] {}));
  sim.run(0);
  std::vector<double> rates;
  for (FlowId id : ids) rates.push_back(net.flow_rate_Bps(id));
  return rates;
}

TEST(FlowNetworkRandom, IncrementalRefillEqualsFillingFromScratch) {
  // All flows start at tick 0 (no latency), then end one group at a time: after each completion
  // the network redoes only the rounds from the earliest one an ended flow was frozen in. The
  // rates it keeps and recomputes must be exactly those of filling the survivors from scratch.
  Rng rng(424242);
  int checks = 0, partial = 0;
  for (int round = 0; round < 200; ++round) {
    const RandomCase c = make_case(rng, /*static_start=*/true);
    Simulator sim;
    FlowNetwork net(sim);
    for (std::size_t l = 0; l < c.bandwidth.size(); ++l) net.add_link("l", c.bandwidth[l], 0);
    std::vector<FlowId> ids(c.flows.size());
    std::vector<char> done(c.flows.size(), 0);
    bool check_pending = false;
    std::function<void()> check = [&] {
      check_pending = false;
      std::vector<std::size_t> active;
      for (std::size_t i = 0; i < c.flows.size(); ++i)
        if (!done[i]) active.push_back(i);
      const std::vector<double> expected = fresh_rates(c, active);
      for (std::size_t k = 0; k < active.size(); ++k)
        ASSERT_EQ(net.flow_rate_Bps(ids[active[k]]), expected[k]) << "case " << round << " flow " << active[k];
      ++checks;
    };
    for (std::size_t i = 0; i < c.flows.size(); ++i)
      ids[i] = net.start_flow(c.flows[i].path, c.flows[i].bytes, [&, i] {
        done[i] = 1;
        if (check_pending) return;
        check_pending = true;  // after this tick's refill
        sim.after(0, [&] { check(); }, EventPriority::kStats);
      });
    const std::uint64_t before = net.refilled_flows();
    sim.run();
    ASSERT_EQ(net.active_flows(), 0u);
    if (net.refilled_flows() - before < net.reallocations() * c.flows.size()) ++partial;
  }
  EXPECT_GT(checks, 1000);
  EXPECT_GT(partial, 50);  // the incremental path was really taken, not only full refills
}

TEST(FlowNetworkRandom, EqualFlowsOnOnePathShareItEvenly) {
  // Eight equal flows on one path at one tick beside a lone flow on its first link.
  Simulator sim;
  FlowNetwork net(sim);
  const LinkId a = net.add_link("a", 100 * kGB, 0), b = net.add_link("b", 50 * kGB, 0);
  std::vector<Tick> done(9, -1);
  for (int i = 0; i < 8; ++i) net.start_flow({a, b}, 1e8, [&, i] { done[static_cast<std::size_t>(i)] = sim.now(); });
  net.start_flow({a}, 3e8, [&] { done[8] = sim.now(); });
  sim.run(0);
  EXPECT_EQ(net.active_flows(), 9u);
  sim.run();
  // The 8 get 50/8 GB/s each (b); the lone flow gets a's 50 GB/s left: 0.8 GB at 6.25 GB/s.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(done[static_cast<std::size_t>(i)], done[0]);
  EXPECT_NEAR(ticks_to_ms(done[0]), 16.0, 1e-6);
}

}  // namespace
}  // namespace moesim
