// The closed-form all-to-all (hardware.all_to_all_model closed-form) against the same all-to-all
// planned as one transfer per pair and timed by the analytic backend: where every GPU launches at
// the same tick and nothing else moves, hardware/closed_form_all_to_all.hpp claims the calls end
// at the same ticks (within one, the rounding of a load summed in another order).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/invariants.hpp"
#include "core/rng.hpp"
#include "hardware/closed_form_all_to_all.hpp"
#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/phase.hpp"
#include "sim/network_backend.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

namespace {

ClusterSpec spec_of(const char* preset, int nodes, const char* all_to_all, const char* collectives) {
  ClusterSpec s = cluster_presets().get(preset).value;
  s.nodes = nodes;
  s.all_to_all_model = all_to_all;
  s.collective_model = collectives;
  s.network_model = "analytic";
  return s;
}

/// Every pair's bytes drawn from [0, 4 MB), a fifth of them zero, and a hot last GPU.
std::vector<std::vector<double>> random_matrix(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j || rng.uniform01() < 0.2) continue;
      m[i][j] = 4e6 * rng.uniform01() * (j == n - 1 ? 5.0 : 1.0);
    }
  return m;
}

/// Runs `g` on the analytic backend over an idle `c`.
std::vector<TaskTiming> run_analytic(const Cluster& c, const TaskGraph& g) {
  Simulator sim;
  const auto net = make_network("analytic", sim);
  c.install(*net);
  const ComputeCostModel no_compute(c.spec().gpu);
  PlanExecutor exec(sim, *net, c.num_gpus(), engine_hooks(c, no_compute));
  return exec.run(g);
}

/// When each GPU's all-to-all call returns, planning it the spec's way and running the plan on
/// the analytic backend; and the plan's task count.
struct Calls {
  std::vector<Tick> end;
  std::size_t tasks = 0;
  double sent = 0.0, across = 0.0;
};
Calls run_calls(const ClusterSpec& spec, const std::vector<int>& gpus, const std::vector<std::vector<double>>& m,
                bool transposed = false) {
  const Cluster c(spec);
  TaskGraph g;
  const TaskId start = g.join({});
  const std::vector<TaskId> done =
      add_all_to_all(g, c, gpus, m, phase::kDispatch, 0, std::vector<TaskId>(gpus.size(), start), transposed);
  const std::vector<TaskTiming> timing = run_analytic(c, g);
  Calls out;
  for (const TaskId d : done) out.end.push_back(timing[d].end);
  out.tasks = g.size();
  for (const Task& t : g.tasks())
    if (t.kind == TaskKind::kCollective) {
      out.sent += t.bytes;
      out.across += t.bytes_across_nodes;
    }
  return out;
}

struct Case {
  const char* preset;
  int nodes;
  const char* collectives;
};

}  // namespace

// line-rate launches every call after the same collective_launch_us, and nccl launches a GPU
// after its slowest pair's latency, equal for every GPU of a uniform, dense matrix: so the flows
// of each case start in one tick and form one analytic group. The PCIe preset's GPUs share
// switches and NICs, so loads from different GPUs meet on one link.
TEST(ClosedFormAllToAll, CallsEndWhereTheAnalyticBackendEndsThem) {
  const Case cases[] = {{"dgx-h100", 1, "line-rate"}, {"dgx-h100", 2, "line-rate"}, {"dgx-a100", 4, "line-rate"},
                        {"grace-rtx4090-2x2", 2, "line-rate"}, {"dgx-h100", 2, "nccl"}};
  for (const Case& k : cases) {
    for (const bool uniform : {false, true}) {
      if (std::string(k.collectives) == "nccl" && !uniform) continue;  // launches differ per GPU
      const ClusterSpec flows = spec_of(k.preset, k.nodes, "flows", k.collectives);
      const int n = flows.num_gpus();
      std::vector<int> gpus(n);
      for (int i = 0; i < n; ++i) gpus[i] = i;
      auto m = random_matrix(n, 7 + static_cast<std::uint64_t>(n));
      if (uniform)
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) m[i][j] = i == j ? 0.0 : 3e6;
      const Calls exact = run_calls(flows, gpus, m);
      const Calls closed = run_calls(spec_of(k.preset, k.nodes, "closed-form", k.collectives), gpus, m);
      const std::string what = std::string(k.preset) + " x" + std::to_string(k.nodes) + " " + k.collectives +
                               (uniform ? " uniform" : " random");
      ASSERT_EQ(closed.end.size(), exact.end.size()) << what;
      for (int i = 0; i < n; ++i) EXPECT_NEAR(closed.end[i], exact.end[i], 1) << what << ", GPU " << i;
      EXPECT_LT(closed.tasks, exact.tasks) << what;
      double off_diagonal = 0.0, across = 0.0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          if (i == j) continue;
          off_diagonal += m[i][j];
          if (i / flows.gpus_per_node != j / flows.gpus_per_node) across += m[i][j];
        }
      EXPECT_NEAR(closed.sent, off_diagonal, 1e-9 * off_diagonal) << what;
      EXPECT_NEAR(closed.across, across, 1e-9 * off_diagonal + 1e-9) << what;
    }
  }
}

// Part of a cluster (every other GPU of two nodes): routes and loads are those of the GPUs named.
TEST(ClosedFormAllToAll, PartOfAClusterMatchesToo) {
  const std::vector<int> gpus = {1, 3, 5, 7, 9, 11, 13, 15};
  const auto m = random_matrix(static_cast<int>(gpus.size()), 3);
  const Calls exact = run_calls(spec_of("dgx-h100", 2, "flows", "line-rate"), gpus, m);
  const Calls closed = run_calls(spec_of("dgx-h100", 2, "closed-form", "line-rate"), gpus, m);
  for (std::size_t i = 0; i < gpus.size(); ++i) EXPECT_NEAR(closed.end[i], exact.end[i], 1) << "GPU " << gpus[i];
}

// A gather handed over as its scatter's matrix (transposed) is read by columns under NCCL's
// model, its pairs inside a node loading their links in row order: the same calls, to the tick
// and the byte, as the transposed copy read by rows. On the PCIe preset pairs inside a node
// share switch links, where the order of the sums matters.
TEST(ClosedFormAllToAll, ATransposedMatrixGivesTheCallsOfItsTranspose) {
  for (const Case& k : {Case{"grace-rtx4090-2x2", 2, "nccl"}, Case{"dgx-h100", 2, "nccl"}, Case{"dgx-a100", 2, "line-rate"}}) {
    const ClusterSpec spec = spec_of(k.preset, k.nodes, "closed-form", k.collectives);
    const int n = spec.num_gpus();
    std::vector<int> gpus(n);
    for (int i = 0; i < n; ++i) gpus[i] = i;
    const auto m = random_matrix(n, 11 + static_cast<std::uint64_t>(n));
    std::vector<std::vector<double>> t(n, std::vector<double>(n));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) t[i][j] = m[j][i];
    const Calls by_rows = run_calls(spec, gpus, t);
    const Calls by_columns = run_calls(spec, gpus, m, /*transposed=*/true);
    const std::string what = std::string(k.preset) + " " + k.collectives;
    EXPECT_EQ(by_columns.end, by_rows.end) << what;
    EXPECT_EQ(by_columns.tasks, by_rows.tasks) << what;
    EXPECT_EQ(by_columns.sent, by_rows.sent) << what;
    EXPECT_EQ(by_columns.across, by_rows.across) << what;
  }
}

// A GPU that neither sends nor receives does not wait for the others: its call returns at its own
// launch, as with transfers. The others start together at the latest launch of those taking part.
TEST(ClosedFormAllToAll, AGpuWithoutTrafficEndsAtItsOwnLaunch) {
  const Cluster c(spec_of("dgx-h100", 1, "closed-form", "line-rate"));
  std::vector<int> gpus = {0, 1, 2};
  std::vector<std::vector<double>> m = {{0, 1e6, 0}, {2e6, 0, 0}, {0, 0, 0}};
  TaskGraph g;
  const TaskId late = g.delay(us_to_ticks(50), phase::kDispatch, 0);
  const TaskId now = g.join({});
  const std::vector<TaskId> done = add_all_to_all(g, c, gpus, m, phase::kDispatch, 0, {now, late, late});
  const std::vector<TaskTiming> t = run_analytic(c, g);
  const Tick launch = us_to_ticks(c.spec().collective_launch_us);
  EXPECT_EQ(t[done[2]].end, us_to_ticks(50) + launch);  // its own launch, after the late start
  // GPUs 0 and 1 start after GPU 1's late launch; the 2 MB from GPU 1 bounds both calls.
  ClosedFormAllToAll closed;
  closed.start(c, gpus);
  const P2pPricing line_rate{0, 1.0, HopLatency::kPaid};
  closed.add(0, 1, m[0][1], line_rate);
  closed.add(1, 0, m[1][0], line_rate);
  const ClosedFormCalls& calls = closed.price(m);
  EXPECT_TRUE(calls.takes_part(0) && calls.takes_part(1) && !calls.takes_part(2));
  EXPECT_EQ(calls.duration[0], calls.duration[1]);
  EXPECT_EQ(calls.duration[2], 0);
  EXPECT_EQ(t[done[0]].end, us_to_ticks(50) + launch + calls.duration[0]);
  EXPECT_EQ(t[done[1]].end, t[done[0]].end);
  // 2 MB over one H100's NVLink port, and its two hops' latency.
  const double bw = c.route_bandwidth_Bps(1, 0);
  EXPECT_NEAR(ticks_to_seconds(calls.duration[0]), 2e6 / bw + ticks_to_seconds(c.route_latency(1, 0)), 1e-11);
  // A pair of the matrix left out, or pairs that disagree on paying their hops, are planning bugs.
  closed.start(c, gpus);
  closed.add(0, 1, m[0][1], line_rate);
  EXPECT_THROW(closed.price(m), InvariantBroken);
  closed.start(c, gpus);
  closed.add(0, 1, m[0][1], line_rate);
  closed.add(1, 0, m[1][0], P2pPricing{0, 1.0, HopLatency::kInLaunch});
  EXPECT_THROW(closed.price(m), std::logic_error);
}

}  // namespace moesim
