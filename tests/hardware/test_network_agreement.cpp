// The analytic network backend against the flow backend (max-min fair sharing) on real cluster
// topologies: a skewed all-to-all and a ring all-reduce on 8 to 64 GPUs. Agreement is asserted
// where sim/analytic_network.hpp claims exactness; elsewhere the error is printed, not asserted.
// The printed table is the one in docs/design.md ("Network backends: flow or analytic").
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"
#include "sim/network_backend.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {

namespace {

/// A DGX preset widened to `nodes` nodes (the registry has 1- and 2-node variants only).
ClusterSpec dgx(const char* preset, int nodes) {
  ClusterSpec s = cluster_presets().get(preset).value;
  s.nodes = nodes;
  return s;
}

/// Completion time of the plan `build` makes, on an idle cluster with backend `model`, and the
/// wall time the simulation took.
struct Timing {
  Tick end = 0;
  double wall_ms = 0.0;
};
template <typename Build>
Timing run_plan(const Cluster& c, const std::string& model, Build build) {
  TaskGraph g;
  build(g);
  Simulator sim;
  const auto net = make_network(model, sim);
  c.install(*net);
  const ComputeCostModel no_compute(c.spec().gpu);
  PlanExecutor exec(sim, *net, c.num_gpus(), engine_hooks(c, no_compute));
  const auto t0 = std::chrono::steady_clock::now();
  exec.run(g);
  const auto t1 = std::chrono::steady_clock::now();
  return {sim.now(), std::chrono::duration<double, std::milli>(t1 - t0).count()};
}

/// Every GPU sends `bytes` to every other GPU, and `hot_factor` times as much to the hot one
/// (the last GPU: on a multi-node cluster its traffic crosses the NICs from every other node).
std::vector<std::vector<double>> skewed_matrix(int n, double bytes, double hot_factor) {
  std::vector<std::vector<double>> m(n, std::vector<double>(n, bytes));
  for (int i = 0; i < n; ++i) {
    m[i][i] = 0.0;
    m[i][n - 1] = i == n - 1 ? 0.0 : bytes * hot_factor;
  }
  return m;
}

struct Row {
  std::string collective, preset;
  int gpus = 0;
  double analytic_ms = 0.0, flow_ms = 0.0, analytic_wall_ms = 0.0, flow_wall_ms = 0.0;
  bool claimed_exact = false;
  double error_pct() const { return 100.0 * (analytic_ms - flow_ms) / flow_ms; }
};

std::vector<Row>& table() {
  static std::vector<Row> rows;
  return rows;
}

constexpr double kTolerancePct = 5.0;

void check(const Row& r) {
  table().push_back(r);
  if (r.claimed_exact) {
    EXPECT_LE(std::abs(r.error_pct()), kTolerancePct)
        << r.collective << " on " << r.gpus << " GPUs of " << r.preset << ": analytic " << r.analytic_ms
        << " ms, flow " << r.flow_ms << " ms";
  }
}

// (preset, nodes): 8, 16, 32 and 64 GPUs.
struct Size {
  const char* preset;
  int nodes;
};
constexpr Size kSizes[] = {{"dgx-a100", 1}, {"dgx-h100", 1}, {"dgx-a100", 2}, {"dgx-h100", 2},
                           {"dgx-a100", 4}, {"dgx-h100", 4}, {"dgx-a100", 8}, {"dgx-h100", 8}};

}  // namespace

// Skewed all-to-all: one group of flows starting together. Every flow into the hot GPU crosses
// its ingress link (NVLink from its own node; its NIC and PCIe ingress from other nodes), which
// carries k times the bytes of any other link those flows cross, so that ingress is the bottleneck
// of every flow crossing it, all of them with the same latency, and it drains at full rate to the
// end: the collective's completion is exact (sim/analytic_network.hpp, first bullet).
TEST(NetworkAgreement, SkewedAllToAll) {
  constexpr double kBytes = 8e6;  // per pair: bandwidth dominates the microsecond latencies
  constexpr double kHot = 4.0;
  for (const Size& s : kSizes) {
    const Cluster c(dgx(s.preset, s.nodes));
    const int n = c.num_gpus();
    std::vector<int> gpus(n);
    for (int i = 0; i < n; ++i) gpus[i] = i;
    const auto m = skewed_matrix(n, kBytes, kHot);
    auto build = [&](TaskGraph& g) {
      const TaskId start = g.join({});
      add_all_to_all(g, c, gpus, m, phase::kCollective, -1, std::vector<TaskId>(n, start));
    };
    const Timing a = run_plan(c, "analytic", build);
    const Timing f = run_plan(c, "flow", build);
    check(Row{"skewed all-to-all", s.preset, n, ticks_to_ms(a.end), ticks_to_ms(f.end), a.wall_ms, f.wall_ms, true});
  }
}

// Ring all-reduce: every step's flows use disjoint links (one flow per ring edge; parallel
// channels of equal share on a shared link are equal flows on one bottleneck), so each step and
// hence the whole collective is exact.
TEST(NetworkAgreement, RingAllReduce) {
  constexpr double kBytes = 256e6;  // per GPU buffer
  for (const Size& s : kSizes) {
    const Cluster c(dgx(s.preset, s.nodes));
    const int n = c.num_gpus();
    std::vector<int> gpus(n);
    for (int i = 0; i < n; ++i) gpus[i] = i;
    auto build = [&](TaskGraph& g) { add_ring_all_reduce(g, c, gpus, kBytes, phase::kCollective, -1, {}); };
    const Timing a = run_plan(c, "analytic", build);
    const Timing f = run_plan(c, "flow", build);
    check(Row{"ring all-reduce", s.preset, n, ticks_to_ms(a.end), ticks_to_ms(f.end), a.wall_ms, f.wall_ms, true});
  }
}

// Outside the claim: a uniform all-to-all and a ring all-reduce over the same GPUs, the all-reduce
// launched 100 us later while the all-to-all still holds the links. The analytic backend prices
// the two (and every later ring step) as if alone, so it under-estimates; printed, not asserted.
TEST(NetworkAgreement, OverlappingCollectives) {
  constexpr double kBytes = 8e6;
  for (const Size& s : kSizes) {
    const Cluster c(dgx(s.preset, s.nodes));
    const int n = c.num_gpus();
    std::vector<int> gpus(n);
    for (int i = 0; i < n; ++i) gpus[i] = i;
    const auto m = skewed_matrix(n, kBytes, 1.0);
    auto build = [&](TaskGraph& g) {
      const TaskId start = g.join({});
      add_all_to_all(g, c, gpus, m, phase::kCollective, -1, std::vector<TaskId>(n, start));
      const TaskId later[] = {g.delay(us_to_ticks(100), phase::kCollective, -1)};
      add_ring_all_reduce(g, c, gpus, 32 * kBytes, phase::kCollective, -1, later);
    };
    const Timing a = run_plan(c, "analytic", build);
    const Timing f = run_plan(c, "flow", build);
    check(Row{"all-to-all + all-reduce overlapping", s.preset, n, ticks_to_ms(a.end), ticks_to_ms(f.end), a.wall_ms,
              f.wall_ms, false});
  }
}

// Prints the table (run last: gtest runs a file's tests in order of definition).
TEST(NetworkAgreement, PrintTable) {
  std::printf("| collective | hardware | GPUs | analytic ms | flow ms | error %% | exact claimed | wall analytic/flow ms |\n");
  std::printf("|---|---|---:|---:|---:|---:|---|---:|\n");
  for (const Row& r : table())
    std::printf("| %s | %s | %d | %.3f | %.3f | %+.2f | %s | %.1f / %.1f |\n", r.collective.c_str(), r.preset.c_str(),
                r.gpus, r.analytic_ms, r.flow_ms, r.error_pct(), r.claimed_exact ? "yes" : "no", r.analytic_wall_ms,
                r.flow_wall_ms);
}

}  // namespace moesim
