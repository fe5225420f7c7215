// Benchmarks (not timed tests): bare event-queue throughput, the main loop against a bare binary
// heap, simulated MoE layers per second for Switch-Base-128 on a DGX-1 under static-ep, and
// request-level serving of Mixtral-8x7B on a DGX H100 against real time, and count-level routing
// draws of a DeepSeek-V3 layer. Run with `make bench`;
// figures in README.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <functional>
#include <vector>

#include "sim/flow_network.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "hardware/cost_model.hpp"
#include "models/routing.hpp"
#include "serving/batch_planner.hpp"
#include "sim/plan_executor.hpp"
#include "core/rng.hpp"
#include "sim/simulator.hpp"

namespace moesim {
namespace {

// Push N events at pseudo-random future ticks, then drain: events/s of the bare queue.
void BM_EventQueuePushPop(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Rng rng(1);
  std::vector<Tick> ticks(n);
  for (auto& t : ticks) t = static_cast<Tick>(rng.below(1'000'000));
  std::uint64_t sink = 0;
  for (auto _ : state) {
    EventQueue q;
    q.reserve(n);
    for (Tick t : ticks) q.push(t, EventPriority::kDefault, [&sink] { ++sink; });
    Tick t;
    while (!q.empty()) q.pop(t)();
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventQueuePushPop)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20);

// This thread's CPU time: the ratio below holds on a loaded machine too.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The yardstick of the main loop: a bare binary heap (std::vector, std::push_heap/pop_heap) of
// (tick, sequence) keys with no callbacks, kept at `depth` pending events: pop one, push one a
// few ticks later. Returns the seconds `events` events took.
double bare_heap_seconds(int depth, std::uint64_t events) {
  struct Key {
    Tick tick;
    std::uint64_t seq;
    bool operator>(const Key& o) const { return tick != o.tick ? tick > o.tick : seq > o.seq; }
  };
  const double start = cpu_seconds();
  std::vector<Key> heap;
  heap.reserve(static_cast<std::size_t>(depth));
  std::uint64_t seq = 0;
  for (int i = 0; i < depth; ++i) heap.push_back({i, seq++});
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  for (std::uint64_t n = 0; n < events; ++n) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Key k = heap.back();
    heap.back() = {k.tick + 1 + static_cast<Tick>(k.seq % 7), seq++};  // the entities' 1..7 ticks
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }
  benchmark::DoNotOptimize(heap.data());
  return cpu_seconds() - start;
}

constexpr std::uint64_t kEventsPerEntity = 100'000;

void BM_BareHeapDepth64(benchmark::State& state) {
  const std::uint64_t events = kEventsPerEntity * 64;
  for (auto _ : state) benchmark::DoNotOptimize(bare_heap_seconds(64, events));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BareHeapDepth64)->Unit(benchmark::kMillisecond);

// A steady population of self-rescheduling entities in the simulator main loop. "vs_bare_heap":
// its event rate over the bare heap's at the same depth, the heap timed right after in this run.
void BM_SimulatorLoop(benchmark::State& state) {
  const int entities = static_cast<int>(state.range(0));
  const std::uint64_t per = kEventsPerEntity;
  double loop_s = 0.0;
  for (auto _ : state) {
    const double start = cpu_seconds();
    Simulator sim;
    std::uint64_t left = per * static_cast<std::uint64_t>(entities);
    std::function<void(int)> tick = [&](int id) {
      if (left == 0) return;  // budget spent: every entity stops
      --left;
      sim.after(1 + id % 7, [&tick, id] { tick(id); });
    };
    for (int i = 0; i < entities; ++i) sim.at(i, [&tick, i] { tick(i); });
    sim.run();
    benchmark::DoNotOptimize(sim.now());
    loop_s += cpu_seconds() - start;
  }
  const double events = static_cast<double>(state.iterations() * per * static_cast<std::uint64_t>(entities));
  state.counters["events/s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  double heap_s = 0.0;
  for (benchmark::IterationCount i = 0; i < state.iterations(); ++i)
    heap_s += bare_heap_seconds(entities, per * static_cast<std::uint64_t>(entities));
  state.counters["vs_bare_heap"] = heap_s / loop_s;
}
BENCHMARK(BM_SimulatorLoop)->Arg(64)->Unit(benchmark::kMillisecond);

// Switch-Base-128 (6 MoE layers) on DGX-1 V100: route, plan and execute one batch per iteration.
void BM_Switch128OnDgx1(benchmark::State& state) {
  const std::string text = "name: bench\nmodel: switch-base-128\nhardware: dgx1-v100\n"
                           "workload: {batch_size: " + std::to_string(state.range(0)) +
                           ", seq_len: 128, routing: {kind: skewed, alpha: 0.5, hot_experts: 10}}\n";
  const Scenario s = load_scenario_text(text, "bench.yaml");
  const Cluster cluster(s.hardware);
  const ComputeCostModel cost = ComputeCostModel::for_cluster(s.hardware);
  const PolicyContext ctx{s.model, cluster, s.workload};
  auto routing = routing_models().get(s.routing.kind).value.make(s.routing.params, routing_context(s), {});
  auto policy = policies().get("static-ep").value.make(s.policies[0].params);
  policy->setup(ctx);
  Simulator sim;
  FlowNetwork net(sim);
  cluster.install(net);
  PlanExecutor exec(sim, net, cluster.num_gpus(), engine_hooks(cluster, cost));
  const int moe_layers = s.model.num_moe_layers();
  int batch = 0;
  std::uint64_t events_before = 0;
  for (auto _ : state) {
    std::vector<LayerRouting> layers;
    for (int l = 0; l < moe_layers; ++l) {
      Rng rng = Rng::derive(s.seed, Stream::kBatchRouting, static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(l));
      layers.push_back(routing->route(batch, l, s.workload.tokens_per_batch(), rng));
    }
    const BatchPlan plan = plan_batch(*policy, ctx, batch, layers);
    benchmark::DoNotOptimize(exec.run(plan.graph));
    ++batch;
  }
  events_before = sim.events_run();
  state.counters["moe_layers/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * moe_layers), benchmark::Counter::kIsRate);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events_before), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Switch128OnDgx1)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond);

// Serving (README's serving benchmark): scenarios/serving/bench-mixtral-dgx-h100.yaml, Mixtral-8x7B
// on one DGX H100 near capacity, with range(0) requests of range(1) output tokens. Reports the
// simulated seconds per wall second ("x_real_time") and the engine's events.
void BM_ServingMixtralDgxH100(benchmark::State& state) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::string file = std::string(root ? root : ".") + "/scenarios/serving/bench-mixtral-dgx-h100.yaml";
  const Scenario s = load_scenario(file, {"workload.requests=" + std::to_string(state.range(0)),
                                          "workload.warmup_requests=" + std::to_string(state.range(0) / 10),
                                          "workload.output_tokens=" + std::to_string(state.range(1))});
  double simulated_s = 0.0, events = 0.0;
  for (auto _ : state) {
    const nlohmann::json result = run_scenario(s);
    const auto& m = result["runs"][0]["metrics"];
    simulated_s += m["makespan_ms"].get<double>() / 1e3;
    events += m["events"].get<double>();
  }
  state.counters["x_real_time"] = benchmark::Counter(simulated_s, benchmark::Counter::kIsRate);
  state.counters["events/s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  state.counters["simulated_s"] = simulated_s / static_cast<double>(state.iterations());
}
BENCHMARK(BM_ServingMixtralDgxH100)
    ->Args({250, 256})
    ->Args({500, 256})
    ->Args({1000, 256})
    ->Args({1000, 128})
    ->Args({1000, 64})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);


// One all-to-all on a single big switch: every GPU sends to every other over its own uplink and
// the receiver's downlink, with skewed sizes (1-16 MB, receivers 0 and 1 hot), so completions
// are spread over thousands of ticks and every completion reshuffles the max-min rates.
void BM_FlowNetworkAllToAll(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  std::uint64_t reallocations = 0;
  for (auto _ : state) {
    Simulator sim;
    FlowNetwork net(sim);
    std::vector<LinkId> up, down;
    for (int g = 0; g < gpus; ++g) {
      up.push_back(net.add_link("gpu->switch", 450e9, us_to_ticks(1)));
      down.push_back(net.add_link("switch->gpu", 450e9, us_to_ticks(1)));
    }
    Rng rng(7);
    int done = 0;
    for (int s = 0; s < gpus; ++s)
      for (int d = 0; d < gpus; ++d) {
        if (s == d) continue;
        const double hot = d < 2 ? 4.0 : 1.0;
        const double bytes = hot * 1e6 * static_cast<double>(1 + rng.below(16));
        net.start_flow({up[static_cast<std::size_t>(s)], down[static_cast<std::size_t>(d)]}, bytes, [&done] { ++done; });
      }
    sim.run();
    benchmark::DoNotOptimize(done);
    reallocations = net.reallocations();
  }
  state.counters["flows"] = static_cast<double>(gpus * (gpus - 1));
  state.counters["reallocations"] = static_cast<double>(reallocations);
}
BENCHMARK(BM_FlowNetworkAllToAll)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

// Count-level routing of one DeepSeek-V3 MoE layer in a decode step (256 experts, top-8, Zipf
// s = 0.6 shares) from Arg GPUs of 64 tokens each: the routing draw every step pays per layer.
void BM_CountSampleDeepSeekDecode(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  std::vector<double> shares(256);
  for (std::size_t e = 0; e < shares.size(); ++e) shares[e] = 1.0 / std::pow(static_cast<double>(e + 1), 0.6);
  const std::vector<double> pi = inclusion_probabilities(shares, 8);
  const std::vector<std::int64_t> tokens(static_cast<std::size_t>(gpus), 64);
  Rng rng(11);
  for (auto _ : state) {
    LayerRouting r = count_sample(pi, 8, tokens, rng);
    benchmark::DoNotOptimize(r.counts.data());
  }
  state.counters["sources/s"] = benchmark::Counter(static_cast<double>(gpus), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CountSampleDeepSeekDecode)->Arg(8)->Arg(64);

}  // namespace
}  // namespace moesim

BENCHMARK_MAIN();
