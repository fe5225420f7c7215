// AMoE's runtimes (§3.1-§3.5): receptor, μ-queues, scheduler, executor and dispatcher per GPU,
// driven by the serving engine's events. Readings where the paper leaves the detail open:
//  - A request's whole prompt is one token batch (the paper's tokens carry Prefill_length,
//    Table 1); decode tokens are one per request per iteration.
//  - An execution drains its queue in arrival order up to max_batch_tokens (whole items).
//  - The dispatcher sends one message per destination GPU per execution, priced as a flow over
//    the real topology after NCCL's per-call latency (price_p2p: NCCL's send, or collective_launch_us).
//  - Requests reserve KV blocks for prompt + output on admission (no preemption); the load
//    balancer picks the attention GPU with the most free blocks (§3.1) and a request that fits
//    nowhere waits, oldest first.
// Design (issue 29): the executor's compute chooser picks one of the tasks already waiting on a
// stream; a μ-queue drain decides what the task is (which layer, which requests, how many
// tokens), which is planning, not stream arbitration. So the runtime keeps the queues and forms
// the batch when its GPU is idle, and the batch runs as one compute task (the layer's kernels
// over the drained tokens) submitted to the executor; a GPU has at most one execution in flight.
#include "serving/amoe/layer_queues.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/invariants.hpp"
#include "core/rng.hpp"
#include "hardware/collectives.hpp"
#include "hardware/host_cost.hpp"
#include "hardware/phase.hpp"
#include "models/operators.hpp"
#include "serving/amoe/micro_batches.hpp"
#include "serving/kv_cache.hpp"

namespace moesim {
namespace {

/// Tokens of one request waiting at one layer (a selection count, at an expert layer).
struct Item {
  int request = 0;
  std::int64_t tokens = 0;
  std::int64_t context = 0;  ///< KV tokens before these (attention); the expert (in a dispatch message)
  int home = 0;              ///< the request's attention GPU
  int mb = 0;                ///< ping-pong: the request's micro-batch this iteration
};

/// One GPU's runtime: a μ-queue per (block, slot) it hosts.
struct Runtime {
  std::vector<std::vector<std::deque<Item>>> queues;  ///< [block][slot]
  QueueDepths depth;                                  ///< tokens per queue
  bool busy = false;
  bool decide_pending = false;
};

}  // namespace

int amoe_expert_gpu(int expert, const AmoeConfig& c, int gpus) {
  return c.attention_gpus + expert % (gpus - c.attention_gpus);
}

struct LayerQueueRuntime::State {
  LayerQueueRuntime& e;
  const ModelSpec& model;
  const Cluster& cluster;
  const RoutingModel& routing;
  const AmoeConfig& config;
  std::uint64_t seed;
  Simulator& sim;
  PlanExecutor& exec;
  std::vector<Request>& requests;
  InterTokenGaps& gaps;
  Hooks hooks;
  std::vector<Runtime> gpus;
  std::vector<PagedKvCache> kv;       ///< per attention GPU
  std::vector<int> moe_index;         ///< per block: index among MoE layers, -1 for dense
  std::vector<int> slot_of_expert;    ///< expert -> its slot on its expert GPU
  std::vector<std::int64_t> pending;  ///< per request: selections of its current block not yet back
  std::deque<int> waiting;            ///< requests that fit on no attention GPU yet
  std::unique_ptr<MicroBatchBarrier> barrier;  ///< ping-pong (micro_batches > 0); null: asynchronous
  std::vector<int> next_iteration;    ///< ping-pong: requests for the next iteration
  std::vector<std::int64_t> requests_on;  ///< per attention GPU: requests it holds
  std::uint64_t attention_runs = 0;
  /// Task graphs of executions and messages, reused: a run makes millions of graphs of two tasks
  /// (host work then a kernel; a launch then a flow), up to a few hundred at once. Their pages
  /// hold 8 tasks: with a step's default of 4,096, the graphs in flight held 84 MB at 500
  /// requests against 9 MB for the whole run before.
  static constexpr std::size_t kSmallGraphPageBits = 3;
  std::vector<std::unique_ptr<TaskGraph>> graphs;
  std::vector<TaskGraph*> free_graphs;
  /// When the graphs in flight were submitted: (tick, graphs still in flight) in submission
  /// order, which is time order, so the oldest is at the front and a finished graph's entry is
  /// found by binary search (no tree node per graph).
  std::deque<std::pair<Tick, std::uint32_t>> in_flight;

  State(LayerQueueRuntime& owner, const ModelSpec& m, const Cluster& c, const RoutingModel& r, const AmoeConfig& cfg,
        std::uint64_t s, Simulator& simulator, PlanExecutor& executor, std::vector<Request>& reqs, InterTokenGaps& g,
        Hooks h)
      : e(owner), model(m), cluster(c), routing(r), config(cfg), seed(s), sim(simulator), exec(executor),
        requests(reqs), gaps(g), hooks(std::move(h)) {}

  /// A cleared graph to plan into, and its handle for the executor (which must not own it).
  TaskGraph* new_graph() {
    if (free_graphs.empty()) {
      graphs.push_back(std::make_unique<TaskGraph>(kSmallGraphPageBits));
      return graphs.back().get();
    }
    TaskGraph* g = free_graphs.back();
    free_graphs.pop_back();
    g->clear();
    return g;
  }
  std::shared_ptr<const TaskGraph> handle(TaskGraph* g) {
    if (!in_flight.empty() && in_flight.back().first == sim.now())
      ++in_flight.back().second;
    else
      in_flight.emplace_back(sim.now(), 1u);
    // Borrowed, not owned: an empty owner aliased to the graph, so no control block is allocated.
    return std::shared_ptr<const TaskGraph>(std::shared_ptr<const TaskGraph>(), g);
  }
  /// Hands a finished graph, submitted at `submitted`, and its timings back for reuse.
  void recycle(TaskGraph* g, Tick submitted, std::vector<TaskTiming>&& timing) {
    free_graphs.push_back(g);
    const auto at = std::lower_bound(in_flight.begin(), in_flight.end(), submitted,
                                     [](const std::pair<Tick, std::uint32_t>& e, Tick t) { return e.first < t; });
    if (at == in_flight.end() || at->first != submitted || at->second == 0)
      throw std::logic_error("layer queues: a graph finished that was not in flight");
    --at->second;
    while (!in_flight.empty() && in_flight.front().second == 0) in_flight.pop_front();
    exec.recycle_timing(std::move(timing));
  }

  void enqueue(int gpu, int block, int slot, const Item& item) {
    Runtime& rt = gpus[static_cast<std::size_t>(gpu)];
    rt.queues[static_cast<std::size_t>(block)][static_cast<std::size_t>(slot)].push_back(item);
    rt.depth[static_cast<std::size_t>(block)][static_cast<std::size_t>(slot)] += item.tokens;
    if (barrier && gpu < config.attention_gpus) barrier->attention_arrived(gpu, block, item.mb);
    kick(gpu);
  }

  // Ping-pong: the first (block, micro-batch) in pipeline order whose barrier has passed and
  // that has tokens here; an expert GPU runs one of its experts (slots) per execution.
  std::optional<std::tuple<int, int, int>> pick_micro_batch(int gpu) const {
    const Runtime& rt = gpus[static_cast<std::size_t>(gpu)];
    const bool attention = gpu < config.attention_gpus;
    for (int b = 0; b < model.layers; ++b)
      for (int m = 0; m < barrier->micro_batches(); ++m) {
        if (attention ? !barrier->attention_ready(gpu, b, m) : !barrier->expert_ready(gpu, b, m)) continue;
        const auto& slots = rt.queues[static_cast<std::size_t>(b)];
        for (std::size_t x = 0; x < slots.size(); ++x)
          for (const Item& it : slots[x])
            if (it.mb == m) return std::tuple{b, static_cast<int>(x), m};
      }
    return std::nullopt;
  }

  // Decisions are taken after every other event of the tick, so that simultaneous arrivals
  // share an execution.
  void kick(int gpu) {
    Runtime& rt = gpus[static_cast<std::size_t>(gpu)];
    if (rt.busy || rt.decide_pending) return;
    rt.decide_pending = true;
    sim.at(sim.now(), [this, gpu] { decide(gpu); }, EventPriority::kStart);
  }

  /// Takes the execution's items out of queue (b, slot): a micro-batch whole, or (asynchronous)
  /// whole items in arrival order up to max_batch_tokens.
  std::vector<Item> drain(Runtime& rt, int b, int slot, int mb) {
    auto& q = rt.queues[static_cast<std::size_t>(b)][static_cast<std::size_t>(slot)];
    std::vector<Item> batch;
    std::int64_t n = 0;
    if (mb >= 0) {
      std::deque<Item> rest;
      for (const Item& it : q) {
        if (it.mb == mb) {
          n += it.tokens;
          batch.push_back(it);
        } else {
          rest.push_back(it);
        }
      }
      q = std::move(rest);
    }
    while (mb < 0 && !q.empty() && (batch.empty() || n + q.front().tokens <= config.max_batch_tokens)) {
      n += q.front().tokens;
      batch.push_back(q.front());
      q.pop_front();
    }
    rt.depth[static_cast<std::size_t>(b)][static_cast<std::size_t>(slot)] -= n;
    return batch;
  }

  void decide(int gpu) {
    Runtime& rt = gpus[static_cast<std::size_t>(gpu)];
    rt.decide_pending = false;
    int b = 0, slot = 0, mb = -1;
    if (barrier) {
      const auto pick = pick_micro_batch(gpu);
      if (!pick) return;
      std::tie(b, slot, mb) = *pick;
    } else {
      const auto pick = pick_queue(config.schedule, rt.depth, config.defrag);
      if (!pick) return;
      std::tie(b, slot) = *pick;
    }
    std::vector<Item> batch = drain(rt, b, slot, mb);
    std::int64_t n = 0, prefill = 0;
    for (const Item& it : batch) n += it.tokens;
    rt.busy = true;
    const bool attention = gpu < config.attention_gpus;
    std::vector<Op> ops;
    if (attention) {
      std::vector<SeqChunk> chunks;
      for (const Item& it : batch) chunks.push_back(SeqChunk{it.tokens, it.context});
      ops = layer_attention_step_ops(model, b, chunks);
      const bool moe = moe_index[static_cast<std::size_t>(b)] >= 0;
      const auto more = moe ? router_ops(model, n) : dense_ffn_ops(model, n);
      ops.insert(ops.end(), more.begin(), more.end());
      e.attention_tokens_[static_cast<std::size_t>(b)] += n;
      for (const Item& it : batch) {
        Request& r = requests[static_cast<std::size_t>(it.request)];
        r.mark_scheduled(sim.now());
        if (r.prefilling()) prefill += it.tokens;
      }
    } else {
      ops = expert_ops(model, {n});
    }
    ++e.executions_;
    e.executed_tokens_ += n;
    // The decision is host work (reference time schedule_us, priced by the host cost model),
    // then the layer's kernels.
    TaskGraph* graph = new_graph();
    const TaskId decision = graph->host(gpu, phase::kSchedule, b, host_work("amoe.decision", 1, config.schedule_us * 1e-6));
    graph->compute(gpu, attention ? phase::kAttention : phase::kExperts, b, std::move(ops), TaskGraph::Deps(&decision, 1));
    const Tick start = sim.now();
    exec.submit(handle(graph), [this, gpu, b, n, prefill, start, graph, batch = std::move(batch)](
                                   GraphId, std::vector<TaskTiming>&& timing) {
      GpuBusy& busy = e.busy_[static_cast<std::size_t>(gpu)];
      busy.scheduling += timing[0].end - timing[0].start;
      busy.compute += timing[1].end - timing[1].start;
      gpus[static_cast<std::size_t>(gpu)].busy = false;
      ExecutionRecord rec{gpu, b, gpu < config.attention_gpus, n, prefill, start, sim.now(), graph, &timing, nullptr};
      if (rec.attention) attention_done(rec, batch);
      else expert_done(rec, batch);
      recycle(graph, start, std::move(timing));
      kick(gpu);
    });
  }

  // One message from `src` to `dst` GPU; `deliver` runs when it has arrived. Priced as one NCCL
  // send (price_p2p): its protocol's latency, then a flow at NCCL's link rate.
  void send(int src, int dst, double bytes, Phase phase, int block, std::function<void()> deliver) {
    if (src == dst) {
      deliver();
      return;
    }
    const P2pPricing p = price_p2p(cluster, src, dst, bytes);
    TaskGraph* graph = new_graph();
    const TaskId launch = graph->delay(p.launch, phase, block, {});  // GPU-less, as a collective's launch
    if (bytes > 0.0) {
      const TaskId flow = graph->transfer(cluster.gpu_endpoint(src), cluster.gpu_endpoint(dst), bytes, phase, block,
                                          TaskGraph::Deps(&launch, 1), src);
      graph->price_transfer(flow, p.wire_scale, p.hop);
    }
    exec.submit(handle(graph), [this, graph, submitted = sim.now(), deliver = std::move(deliver)](
                                   GraphId, std::vector<TaskTiming>&& timing) {
      if (hooks.sent) hooks.sent(*graph, timing);
      recycle(graph, submitted, std::move(timing));
      deliver();
    });
  }

  static double message_bytes(const std::vector<Item>& items, const ModelSpec& model) {
    double bytes = 0.0;
    for (const Item& it : items) bytes += static_cast<double>(it.tokens) * token_bytes(model);
    return bytes;
  }

  // Dispatcher after attention (§3.2): dense blocks continue locally; MoE blocks route every
  // token and send each expert GPU its selections, permuted by expert.
  void attention_done(ExecutionRecord& rec, const std::vector<Item>& batch) {
    const int b = rec.block, gpu = rec.gpu;
    const int moe = moe_index[static_cast<std::size_t>(b)];
    if (moe < 0) {
      if (hooks.executed) hooks.executed(rec);
      for (const Item& it : batch) next_block(it, b);
      return;
    }
    Rng rng = Rng::derive(seed, Stream::kAmoeRouting, attention_runs++, static_cast<std::uint64_t>(moe));
    const LayerRouting r = routing.route(static_cast<int>(attention_runs - 1), moe, rec.tokens, rng);
    rec.routing = &r;
    if (hooks.executed) hooks.executed(rec);
    const int G = cluster.num_gpus(), k = model.top_k;
    std::vector<std::vector<Item>> to(static_cast<std::size_t>(G));
    std::vector<std::int64_t> per_expert(static_cast<std::size_t>(model.experts));
    std::int64_t t0 = 0;
    for (const Item& it : batch) {
      std::fill(per_expert.begin(), per_expert.end(), 0);
      for (std::int64_t t = t0; t < t0 + it.tokens; ++t)
        for (int j = 0; j < k; ++j) ++per_expert[static_cast<std::size_t>(r.experts[static_cast<std::size_t>(t * k + j)])];
      t0 += it.tokens;
      pending[static_cast<std::size_t>(it.request)] = it.tokens * k;
      for (int ex = 0; ex < model.experts; ++ex)
        if (per_expert[static_cast<std::size_t>(ex)] > 0)
          to[static_cast<std::size_t>(amoe_expert_gpu(ex, config, G))].push_back(
              Item{it.request, per_expert[static_cast<std::size_t>(ex)], ex, gpu, it.mb});
    }
    // Ping-pong's all-to-all reaches every expert GPU, with or without tokens for it.
    const int mb = barrier ? batch.front().mb : -1;
    for (int x = config.attention_gpus; x < G; ++x) {
      auto& items = to[static_cast<std::size_t>(x)];
      if (items.empty() && mb < 0) continue;
      const double bytes = message_bytes(items, model);  // before `items` moves into the delivery
      send(gpu, x, bytes, phase::kDispatch, b, [this, x, b, mb, items = std::move(items)] {
        for (const Item& it : items) {
          const auto ex = static_cast<std::size_t>(it.context);
          e.expert_arrivals_[static_cast<std::size_t>(b)][ex] += it.tokens;
          enqueue(x, b, slot_of_expert[ex], Item{it.request, it.tokens, 0, it.home, it.mb});
        }
        if (mb >= 0) {
          barrier->message_arrived(x, b, mb);
          kick(x);
        }
      });
    }
  }

  // Dispatcher after an expert (§3.2): outputs go home, permuted by attention GPU; the token
  // pool releases a request's token once all k selections are back.
  void expert_done(const ExecutionRecord& rec, const std::vector<Item>& batch) {
    if (hooks.executed) hooks.executed(rec);
    const int b = rec.block;
    std::vector<std::vector<Item>> home(static_cast<std::size_t>(config.attention_gpus));
    for (const Item& it : batch) home[static_cast<std::size_t>(it.home)].push_back(it);
    for (int a = 0; a < config.attention_gpus; ++a) {
      auto& items = home[static_cast<std::size_t>(a)];
      if (items.empty()) continue;
      const double bytes = message_bytes(items, model);  // before `items` moves into the delivery
      send(rec.gpu, a, bytes, phase::kCombine, b, [this, b, items = std::move(items)] {
        for (const Item& it : items) {
          auto& left = pending[static_cast<std::size_t>(it.request)];
          left -= it.tokens;
          if (left == 0) {
            const Request& r = requests[static_cast<std::size_t>(it.request)];
            next_block(Item{it.request, r.prefilling() ? r.prefill_target - r.computed : 1, r.computed, it.home, it.mb}, b);
          }
        }
      });
    }
  }

  void next_block(const Item& it, int b) {
    if (b + 1 < model.layers) {
      enqueue(it.home, b + 1, 0, it);
      return;
    }
    Request& r = requests[static_cast<std::size_t>(it.request)];
    r.computed += it.tokens;
    ++r.generated;
    r.record_tokens(sim.now(), 1, gaps);
    const bool iteration_over = barrier && barrier->finish_item();
    if (!r.done()) {
      if (barrier) next_iteration.push_back(it.request);
      else enqueue(it.home, 0, 0, Item{it.request, 1, r.computed, it.home});
      if (iteration_over) start_iteration();
      return;
    }
    kv[static_cast<std::size_t>(r.rank)].release(r.spec.id);
    --requests_on[static_cast<std::size_t>(r.rank)];
    hooks.finished(r);
    admit_waiting();
    if (iteration_over) start_iteration();
  }

  // Ping-pong: the requests admitted so far form the next iteration, split round-robin into
  // the micro-batches in request order; each enters block 0 with its prompt or one token.
  void start_iteration() {
    if (barrier->running() || next_iteration.empty()) return;
    std::vector<int> active;
    active.swap(next_iteration);
    std::sort(active.begin(), active.end());
    const int M = barrier->micro_batches();
    std::vector<std::vector<std::int64_t>> items(static_cast<std::size_t>(config.attention_gpus),
                                                 std::vector<std::int64_t>(static_cast<std::size_t>(M), 0));
    for (std::size_t i = 0; i < active.size(); ++i)
      ++items[static_cast<std::size_t>(requests[static_cast<std::size_t>(active[i])].rank)][i % static_cast<std::size_t>(M)];
    barrier->begin(items);
    for (std::size_t i = 0; i < active.size(); ++i) {
      const Request& r = requests[static_cast<std::size_t>(active[i])];
      enqueue(r.rank, 0, 0,
              Item{active[i], r.prefilling() ? r.prefill_target - r.computed : 1, r.computed, r.rank,
                   static_cast<int>(i % static_cast<std::size_t>(M))});
    }
  }

  // The load balancer (§3.1): the attention GPU with the most free KV blocks (or, as SGLang's
  // data-parallel router, the fewest requests), oldest request first; ties to the lowest GPU.
  void admit_waiting() {
    while (!waiting.empty()) {
      Request& r = requests[static_cast<std::size_t>(waiting.front())];
      const std::int64_t need = r.spec.prompt_tokens + r.spec.output_tokens;
      auto load = [&](int a) {
        return config.place_by_requests ? -static_cast<double>(requests_on[static_cast<std::size_t>(a)])
                                        : static_cast<double>(kv[static_cast<std::size_t>(a)].free_blocks());
      };
      int best = -1;
      for (int a = 0; a < config.attention_gpus; ++a)
        if (kv[static_cast<std::size_t>(a)].can_grow(r.spec.id, need) && (best < 0 || load(a) > load(best))) best = a;
      if (best < 0) return;
      kv[static_cast<std::size_t>(best)].grow(r.spec.id, need);
      ++requests_on[static_cast<std::size_t>(best)];
      waiting.pop_front();
      r.rank = r.gpu = best;
      r.pool = 0;
      r.state = RequestState::kRunning;
      const int index = static_cast<int>(&r - requests.data());
      if (barrier) {
        next_iteration.push_back(index);
        continue;
      }
      enqueue(best, 0, 0, Item{index, r.spec.prompt_tokens, 0, best});
    }
    if (barrier) start_iteration();
  }
};

LayerQueueRuntime::LayerQueueRuntime(const ModelSpec& model, const Cluster& cluster, const RoutingModel& routing,
                                     const LayerQueueDeployment& deployment, std::int64_t kv_block_tokens,
                                     std::uint64_t seed, Simulator& sim, PlanExecutor& exec,
                                     std::vector<Request>& requests, InterTokenGaps& gaps, Hooks hooks)
    : deployment_(deployment) {
  const AmoeConfig& config = deployment_.config;
  s_ = std::make_unique<State>(*this, model, cluster, routing, config, seed, sim, exec, requests, gaps, std::move(hooks));
  const int G = cluster.num_gpus(), A = config.attention_gpus;
  if (A < 1 || A >= G) throw std::logic_error("amoe: attention GPUs must leave at least one expert GPU");
  if (static_cast<int>(deployment_.kv_blocks.size()) != A)
    throw std::logic_error("amoe: one KV size per attention GPU expected");
  s_->pending.assign(requests.size(), 0);
  s_->requests_on.assign(static_cast<std::size_t>(A), 0);
  for (int a = 0; a < A; ++a) s_->kv.emplace_back(deployment_.kv_blocks[static_cast<std::size_t>(a)], kv_block_tokens);
  const int blocks = model.layers;
  int moe = 0;
  for (int b = 0; b < blocks; ++b) s_->moe_index.push_back(model.is_moe_layer(b) ? moe++ : -1);
  std::vector<int> slots(static_cast<std::size_t>(G), 0);
  s_->slot_of_expert.resize(static_cast<std::size_t>(model.experts));
  for (int x = 0; x < model.experts; ++x)
    s_->slot_of_expert[static_cast<std::size_t>(x)] = slots[static_cast<std::size_t>(amoe_expert_gpu(x, config, G))]++;
  s_->gpus.resize(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const auto n = static_cast<std::size_t>(g < A ? 1 : slots[static_cast<std::size_t>(g)]);
    Runtime& rt = s_->gpus[static_cast<std::size_t>(g)];
    rt.queues.assign(static_cast<std::size_t>(blocks), std::vector<std::deque<Item>>(n));
    rt.depth.assign(static_cast<std::size_t>(blocks), std::vector<std::int64_t>(n, 0));
  }
  busy_.resize(static_cast<std::size_t>(G));
  if (config.micro_batches > 0) s_->barrier = std::make_unique<MicroBatchBarrier>(A, G, blocks, config.micro_batches);
  expert_arrivals_.assign(static_cast<std::size_t>(blocks), std::vector<std::int64_t>(static_cast<std::size_t>(model.experts), 0));
  attention_tokens_.assign(static_cast<std::size_t>(blocks), 0);
}

LayerQueueRuntime::~LayerQueueRuntime() = default;

void LayerQueueRuntime::arrive(int index) {
  Request& r = s_->requests[static_cast<std::size_t>(index)];
  r.prefill_target = r.spec.prompt_tokens;
  s_->waiting.push_back(index);
  s_->admit_waiting();
}

void LayerQueueRuntime::check_drained() const {
  for (std::size_t g = 0; g < s_->kv.size(); ++g)
    check_invariant(s_->kv[g].used_blocks() == 0, Invariant::kKvBalanced, [&] {
      return "attention GPU " + std::to_string(g) + " still holds " + std::to_string(s_->kv[g].used_blocks()) +
             " KV blocks after every request finished";
    });
}

Tick LayerQueueRuntime::horizon() const {
  return s_->in_flight.empty() ? s_->sim.now() : std::min(s_->sim.now(), s_->in_flight.front().first);
}

double LayerQueueRuntime::kv_cache_peak_fraction() const {
  double peak = 0.0;
  for (const PagedKvCache& kv : s_->kv)
    if (kv.total_blocks() > 0)
      peak = std::max(peak, static_cast<double>(kv.peak_used_blocks()) / static_cast<double>(kv.total_blocks()));
  return peak;
}

}  // namespace moesim
