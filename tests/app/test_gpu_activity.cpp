// Per-GPU activity from hand-made plans with closed-form timings: the time breakdown (HarMoEny
// Fig. 4a / Fig. 9) and the Chrome-trace lanes, which classify tasks alike; then both end to end
// through `moesim run` with a policy whose plans have copies and CPU-side scheduling delays.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <unistd.h>

#include "sim/flow_network.hpp"
#include "app/run/metrics.hpp"
#include "policies/expert_parallel.hpp"
#include "sim/chrome_trace.hpp"
#include "tests/support/run_cli.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

constexpr Tick U = kPsPerUs;  // plan times in microseconds: whole nanoseconds in the trace too

// GPUs 0 and 1 and a host (endpoint 2); every link moves one byte per tick, without latency.
struct Engine {
  Simulator sim;
  FlowNetwork net{sim};
  std::vector<std::vector<std::vector<LinkId>>> routes{3, std::vector<std::vector<LinkId>>(3)};
  PlanExecutor exec{sim, net, 2,
                    {[](const Task&, std::span<const Op> ops) { return static_cast<Tick>(ops[0].flops); },
                     [this](int s, int d) -> const std::vector<LinkId>& { return routes[s][d]; }}};
  Engine() {
    for (int s = 0; s < 3; ++s)
      for (int d = 0; d < 3; ++d)
        if (s != d) routes[s][d] = {net.add_link(std::to_string(s) + "->" + std::to_string(d), 1e12, 0)};
  }
};

std::vector<Op> work(Tick ticks) {
  Op op;
  op.flops = static_cast<double>(ticks);
  return {op};
}

// GPU 0 computes [0, 100), copies from the host [0, 150), sends to GPU 1 [0, 200) and is
// scheduled on the CPU [0, 300); GPU 1 receives [0, 200), then computes [200, 250). In U.
TaskGraph mixed_plan() {
  TaskGraph g;
  g.compute(0, phase::kExperts, 0, work(100 * U));
  g.transfer(2, 0, 150.0 * U, phase::kFetch, 0, {}, 0, CopyEngine::kHostToDevice);
  const TaskId x = g.transfer(0, 1, 200.0 * U, phase::kDispatch, 0, {}, 0);
  g.delay(300 * U, phase::kSchedule, 0, {}, 0);
  const TaskId after_x[] = {x};
  g.compute(1, phase::kExperts, 0, work(50 * U), after_x);
  return g;
}

void expect_times(const GpuTime& t, double compute, double copy, double comm, double sched, double wait) {
  const double tol = 10.0;  // ticks: flow completion rounds to whole ticks
  EXPECT_NEAR(static_cast<double>(t.compute), compute * U, tol);
  EXPECT_NEAR(static_cast<double>(t.copy), copy * U, tol);
  EXPECT_NEAR(static_cast<double>(t.communication), comm * U, tol);
  EXPECT_NEAR(static_cast<double>(t.scheduling), sched * U, tol);
  EXPECT_NEAR(static_cast<double>(t.waiting), wait * U, tol);
}

// Events of a trace per (GPU, lane name without its row suffix).
std::map<std::pair<int, std::string>, int> lane_counts(const nlohmann::json& events) {
  std::map<std::pair<int, int>, std::string> thread;
  for (const auto& e : events)
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      const std::string name = e["args"]["name"];
      thread[{e["pid"].get<int>(), e["tid"].get<int>()}] = name.substr(0, name.find(" #"));
    }
  std::map<std::pair<int, std::string>, int> counts;
  for (const auto& e : events)
    if (e["ph"] == "X") ++counts[{e["pid"].get<int>(), thread.at({e["pid"].get<int>(), e["tid"].get<int>()})}];
  return counts;
}

}  // namespace

TEST(GpuTimeBreakdown, OneGpuComputesWhileTheOtherWaits) {
  Engine e;
  TaskGraph g;
  g.compute(0, phase::kExperts, 0, work(100 * U));
  g.compute(1, phase::kExperts, 0, work(25 * U));
  const auto timing = e.exec.run(g);
  const auto t = gpu_time_breakdown(g, timing, 2, 0, 100 * U);
  expect_times(t[0], 100, 0, 0, 0, 0);
  expect_times(t[1], 25, 0, 0, 0, 75);
}

TEST(GpuTimeBreakdown, PrecedenceComputeCopyCommunicationScheduling) {
  Engine e;
  const TaskGraph g = mixed_plan();
  const auto timing = e.exec.run(g);
  const auto t = gpu_time_breakdown(g, timing, 2, 0, 300 * U);
  expect_times(t[0], 100, 50, 50, 100, 0);
  expect_times(t[1], 50, 0, 200, 0, 50);  // receiving counts as communication
  for (const GpuTime& gt : t) EXPECT_EQ(gt.total(), 300 * U);
  EXPECT_NEAR(static_cast<double>(t[0].busy()), 150.0 * U, 10.0);  // what gpu_idle_fraction counts
  // A window clips the tasks: the first 120 U of GPU 0 are compute, then copy.
  const auto early = gpu_time_breakdown(g, timing, 2, 0, 120 * U);
  expect_times(early[0], 100, 20, 0, 0, 0);
}

TEST(GpuTimeBreakdown, JsonPartsSumToMakespan) {
  std::vector<GpuTime> t(2);
  t[0].compute = 3 * U;
  t[0].waiting = 1 * U;
  t[1].communication = 2 * U;
  t[1].scheduling = 2 * U;
  const auto j = gpu_time_json(t, 4 * U);
  EXPECT_DOUBLE_EQ(j["per_gpu_ms"][0]["compute"].get<double>(), 0.003);
  EXPECT_DOUBLE_EQ(j["per_gpu_ms"][1]["scheduling"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(j["mean_fraction"]["compute"].get<double>(), 0.375);
  EXPECT_DOUBLE_EQ(j["mean_fraction"]["communication"].get<double>(), 0.25);
  double sum = 0;
  for (const auto& [k, v] : j["mean_fraction"].items()) sum += v.get<double>();
  EXPECT_DOUBLE_EQ(sum, 1.0);
}

TEST(ChromeTrace, TasksLandOnTheirLanes) {
  Engine e;
  const TaskGraph g = mixed_plan();
  const auto timing = e.exec.run(g);
  ChromeTrace trace(2, phase_name);
  trace.add_batch(g, timing, 7);
  const auto counts = lane_counts(trace.events());
  const std::map<std::pair<int, std::string>, int> want = {
      {{0, "compute"}, 1},      {{0, "copy engine"}, 1},     {{0, "network send"}, 1},
      {{0, "schedule (CPU)"}, 1}, {{1, "network receive"}, 1}, {{1, "compute"}, 1}};
  EXPECT_EQ(counts, want);
  int processes = 0;
  for (const auto& ev : trace.events()) {
    if (ev["ph"] == "M" && ev["name"] == "process_name") ++processes;
    if (ev["ph"] != "X") continue;
    EXPECT_EQ(ev["args"]["batch"], 7);
    if (ev["name"] == "dispatch L0") {  // the network transfer, on both ends, 0 to 200 us
      EXPECT_DOUBLE_EQ(ev["ts"].get<double>(), 0.0);
      EXPECT_NEAR(ev["dur"].get<double>(), 200.0, 1e-3);
      EXPECT_EQ(ev["args"]["src"], 0);
      EXPECT_EQ(ev["args"]["dst"], 1);
    }
    if (ev["name"] == "fetch L0") {
      EXPECT_EQ(ev["args"]["engine"], "host-to-device");
    }
  }
  EXPECT_EQ(processes, 2);
}

TEST(ChromeTrace, ConcurrentFlowsGetTheirOwnRows) {
  // Perfetto drops slices that overlap on one thread, so overlapping sends take separate rows,
  // and a row is reused once it is free.
  Engine e;
  TaskGraph g;
  const TaskId a = g.transfer(0, 1, 100.0 * U, phase::kDispatch, 0);
  g.transfer(0, 2, 100.0 * U, phase::kDispatch, 0);
  const TaskId after_a[] = {a};
  g.transfer(0, 1, 10.0 * U, phase::kCombine, 0, after_a);
  const auto timing = e.exec.run(g);
  ChromeTrace trace(2, phase_name);
  trace.add_batch(g, timing, 0);
  std::vector<int> send_tids;
  for (const auto& ev : trace.events())
    if (ev["ph"] == "X" && ev["pid"] == 0) send_tids.push_back(ev["tid"].get<int>());
  const int row0 = ChromeTrace::thread_id(GpuActivity::kSend, 0), row1 = ChromeTrace::thread_id(GpuActivity::kSend, 1);
  EXPECT_EQ(send_tids, (std::vector<int>{row0, row1, row0}));
  const auto counts = lane_counts(trace.events());
  EXPECT_EQ(counts.at({0, "network send"}), 3);
  EXPECT_EQ(counts.at({1, "network receive"}), 2);  // the host receives too, but is not a GPU
}

TEST(ChromeTrace, GpuUsesClassifyByEndpoint) {
  TaskGraph g;
  const TaskId host_in = g.transfer(4, 2, 1.0, phase::kFetch, 0);
  const TaskId loop = g.transfer(1, 1, 1.0, phase::kDispatch, 0);
  const TaskId cpu = g.delay(5, phase::kCollective, 0);
  const auto in = gpu_uses(g.task(host_in), 4);
  ASSERT_EQ(in.count, 1);
  EXPECT_EQ(in.items[0].gpu, 2);
  EXPECT_EQ(in.items[0].activity, GpuActivity::kReceive);
  EXPECT_EQ(gpu_uses(g.task(loop), 4).count, 2);
  EXPECT_EQ(gpu_uses(g.task(cpu), 4).count, 0);  // a delay without a GPU occupies none
}

// --- end to end ---------------------------------------------------------------------------------

namespace {

// A test-only policy whose plans have every kind of per-GPU activity: static contiguous experts,
// a CPU-side scheduling delay on each GPU before the scatter, a peer weight copy (GPU 0's copy
// engine) and a host fetch (GPU 1's).
class CopiesAndDelays final : public ExpertParallelPolicy {
 public:
  void setup(const PolicyContext& ctx) override {
    owner_ = static_owner("contiguous", ctx.model.experts, ctx.cluster.num_gpus());
  }
  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    const double per_gpu = ctx.model.expert_bytes() * ctx.model.num_moe_layers() *
                           (static_cast<double>(ctx.model.experts) / ctx.cluster.num_gpus() + 1.0);
    return std::vector<double>(static_cast<std::size_t>(ctx.cluster.num_gpus()), per_gpu);
  }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const int G = ctx.cluster.num_gpus();
    Dispatch d(G, ctx.model.experts);
    const LayerRouting& r = *in.routing;
    for (std::int64_t t = 0; t < r.num_tokens; ++t)
      for (int s = 0; s < r.top_k; ++s) {
        const int e = r.expert(t, s);
        ++d.send[(*in.token_home)[t]][owner_[e]];
        ++d.load[owner_[e]][e];
      }
    d.copies = {{0, ctx.cluster.gpu_endpoint(0), G - 1}, {2, ctx.cluster.host_endpoint(0), 1}};
    d.copies_start = CopyStart::kAfterSchedule;
    return d;
  }
  std::vector<TaskId> before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                     TaskId all_routed) override {
    std::vector<TaskId> done;
    const TaskId dep[] = {all_routed};
    for (int g = 0; g < ctx.cluster.num_gpus(); ++g)
      done.push_back(plan.delay(us_to_ticks(5.0), phase::kSchedule, in.layer, dep, g));
    return done;
  }

 private:
  std::vector<int> owner_;
};

[[maybe_unused]] const bool kRegistered = policies().add(
    "test-copies-delays", "test only: static placement with scheduling delays, a peer copy and a host fetch",
    PolicyInfo{{}, [](const ParamSet&) { return std::make_unique<CopiesAndDelays>(); }});

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST(GpuActivityEndToEnd, RunWritesTraceWithEveryLaneAndBreakdown) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("moesim-activity-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "s.yaml") << "name: lanes\nseed: 3\nmodel: {preset: switch-base-8, layers: 4}\n"
                                   "hardware: hgx-a100-4gpu-nvlink\n"
                                   "workload: {batch_size: 8, seq_len: 32, batches: 2, routing: {kind: uniform}}\n"
                                   "policy: test-copies-delays\noutput: {trace: true}\n";
  const auto r =
      testing_support::run_cli_captured({"run", (dir / "s.yaml").string(), "--out", (dir / "out").string(), "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto result = read_json(dir / "out" / "result.json");
  const auto& run = result["runs"][0];
  const auto trace = read_json(dir / "out" / run["trace"].get<std::string>());
  ASSERT_TRUE(trace.contains("traceEvents"));
  const auto counts = lane_counts(trace["traceEvents"]);
  int processes = 0;
  for (const auto& e : trace["traceEvents"]) processes += e["ph"] == "M" && e["name"] == "process_name";
  EXPECT_EQ(processes, 4);
  for (int g = 0; g < 4; ++g)
    for (const char* lane : {"compute", "network send", "network receive", "schedule (CPU)"})
      EXPECT_GT(counts.count({g, lane}) ? counts.at({g, lane}) : 0, 0) << "GPU " << g << " " << lane;
  EXPECT_GT(counts.count({0, "copy engine"}), 0u);  // the peer copy
  EXPECT_GT(counts.count({1, "copy engine"}), 0u);  // the host fetch

  const auto& m = run["metrics"];
  const double makespan = m["makespan_ms"].get<double>();
  const auto& per_gpu = m["gpu_time_breakdown"]["per_gpu_ms"];
  ASSERT_EQ(per_gpu.size(), 4u);
  for (int g = 0; g < 4; ++g) {
    double sum = 0;
    for (const auto& [k, v] : per_gpu[g].items()) sum += v.get<double>();
    EXPECT_NEAR(sum, makespan, 1e-9 * makespan) << g;
    EXPECT_GT(per_gpu[g]["scheduling"].get<double>(), 0.0) << g;
  }
  EXPECT_GT(per_gpu[0]["copy"].get<double>() + per_gpu[1]["copy"].get<double>(), 0.0);
  fs::remove_all(dir);
}

}  // namespace moesim
