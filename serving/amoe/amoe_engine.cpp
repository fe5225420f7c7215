// AMoE's runtimes (§3.1-§3.5): receptor, μ-queues, scheduler, executor and dispatcher per GPU,
// driven by the event loop. Readings where the paper leaves the detail open:
//  - A request's whole prompt is one token batch (the paper's tokens carry Prefill_length,
//    Table 1); decode tokens are one per request per iteration.
//  - An execution drains its queue in arrival order up to max_batch_tokens (whole items).
//  - The dispatcher sends one message per destination GPU per execution, priced as a flow over
//    the real topology after NCCL's per-call latency (price_p2p: NCCL's send, or collective_launch_us).
//  - Requests reserve KV blocks for prompt + output on admission (no preemption); the load
//    balancer picks the attention GPU with the most free blocks (§3.1) and a request that fits
//    nowhere waits, oldest first.
#include "serving/amoe/amoe_engine.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <tuple>
#include <stdexcept>
#include <string>

#include "core/invariants.hpp"
#include "core/rng.hpp"
#include "hardware/collectives.hpp"
#include "models/operators.hpp"
#include "serving/amoe/micro_batches.hpp"
#include "serving/kv_cache.hpp"
#include "sim/network_backend.hpp"
#include "sim/simulator.hpp"

namespace moesim {
namespace {

/// Tokens of one request waiting at one layer (a selection count, at an expert layer).
struct Item {
  int request = 0;
  std::int64_t tokens = 0;
  std::int64_t context = 0;  ///< KV tokens before these (attention)
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

struct AmoeEngine::State {
  const ModelSpec& model;
  const Cluster& cluster;
  const ComputeCostModel& cost;
  const RoutingModel& routing;
  AmoeConfig config;
  ArrivalSpec arrival;
  std::uint64_t seed;
  Simulator sim;
  std::unique_ptr<NetworkBackend> net;
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
  std::size_t next_closed = 0;
  std::int64_t finished = 0;

  State(const ModelSpec& m, const Cluster& c, const ComputeCostModel& co, const RoutingModel& r, const AmoeConfig& cfg,
        const ArrivalSpec& a, std::uint64_t s)
      : model(m), cluster(c), cost(co), routing(r), config(cfg), arrival(a), seed(s),
        net(make_network(c.spec().network_model, sim)) {
    c.install(*net);
  }
};

AmoeEngine::AmoeEngine(const ModelSpec& model, const Cluster& cluster, const ComputeCostModel& cost,
                       const RoutingModel& routing, const AmoeConfig& config, const SchedulerConfig& serving,
                       const ArrivalSpec& arrival, std::vector<std::int64_t> kv_blocks, std::uint64_t seed,
                       std::vector<RequestSpec> requests)
    : s_(std::make_unique<State>(model, cluster, cost, routing, config, arrival, seed)) {
  const int G = cluster.num_gpus(), A = config.attention_gpus;
  if (A < 1 || A >= G) throw std::logic_error("amoe: attention GPUs must leave at least one expert GPU");
  if (static_cast<int>(kv_blocks.size()) != A) throw std::logic_error("amoe: one KV size per attention GPU expected");
  for (const RequestSpec& spec : requests) {
    Request r;
    r.spec = spec;
    requests_.push_back(std::move(r));
  }
  s_->pending.assign(requests_.size(), 0);
  s_->requests_on.assign(static_cast<std::size_t>(A), 0);
  for (int a = 0; a < A; ++a) s_->kv.emplace_back(kv_blocks[static_cast<std::size_t>(a)], serving.kv_block_tokens);
  const int blocks = model.layers;
  int moe = 0;
  for (int b = 0; b < blocks; ++b) s_->moe_index.push_back(model.is_moe_layer(b) ? moe++ : -1);
  std::vector<int> slots(static_cast<std::size_t>(G), 0);
  s_->slot_of_expert.resize(static_cast<std::size_t>(model.experts));
  for (int e = 0; e < model.experts; ++e) s_->slot_of_expert[static_cast<std::size_t>(e)] = slots[static_cast<std::size_t>(amoe_expert_gpu(e, config, G))]++;
  s_->gpus.resize(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const int n = g < A ? 1 : slots[static_cast<std::size_t>(g)];
    s_->gpus[static_cast<std::size_t>(g)].queues.assign(static_cast<std::size_t>(blocks), std::vector<std::deque<Item>>(static_cast<std::size_t>(n)));
    s_->gpus[static_cast<std::size_t>(g)].depth.assign(static_cast<std::size_t>(blocks), std::vector<std::int64_t>(static_cast<std::size_t>(n), 0));
  }
  busy_.resize(static_cast<std::size_t>(G));
  if (config.micro_batches > 0) s_->barrier = std::make_unique<MicroBatchBarrier>(A, G, blocks, config.micro_batches);
  expert_arrivals_.assign(static_cast<std::size_t>(blocks), std::vector<std::int64_t>(static_cast<std::size_t>(model.experts), 0));
  attention_tokens_.assign(static_cast<std::size_t>(blocks), 0);
}

AmoeEngine::~AmoeEngine() = default;

Tick AmoeEngine::now() const { return s_->sim.now(); }
std::uint64_t AmoeEngine::events() const { return s_->sim.events_run(); }

double AmoeEngine::kv_cache_peak_fraction() const {
  double peak = 0.0;
  for (const PagedKvCache& kv : s_->kv)
    if (kv.total_blocks() > 0)
      peak = std::max(peak, static_cast<double>(kv.peak_used_blocks()) / static_cast<double>(kv.total_blocks()));
  return peak;
}

void AmoeEngine::run() {
  State& s = *s_;
  // The engine's steps, as closures over `this`: defined here so that they share State.
  struct Steps {
    AmoeEngine& e;
    State& s;

    void enqueue(int gpu, int block, int slot, const Item& item) {
      Runtime& rt = s.gpus[static_cast<std::size_t>(gpu)];
      rt.queues[static_cast<std::size_t>(block)][static_cast<std::size_t>(slot)].push_back(item);
      rt.depth[static_cast<std::size_t>(block)][static_cast<std::size_t>(slot)] += item.tokens;
      if (s.barrier && gpu < s.config.attention_gpus) s.barrier->attention_arrived(gpu, block, item.mb);
      kick(gpu);
    }
    // Ping-pong: the first (block, micro-batch) in pipeline order whose barrier has passed and
    // that has tokens here; an expert GPU runs one of its experts (slots) per execution.
    std::optional<std::tuple<int, int, int>> pick_micro_batch(int gpu) const {
      const Runtime& rt = s.gpus[static_cast<std::size_t>(gpu)];
      const bool attention = gpu < s.config.attention_gpus;
      for (int b = 0; b < s.model.layers; ++b)
        for (int m = 0; m < s.barrier->micro_batches(); ++m) {
          if (attention ? !s.barrier->attention_ready(gpu, b, m) : !s.barrier->expert_ready(gpu, b, m)) continue;
          const auto& slots = rt.queues[static_cast<std::size_t>(b)];
          for (std::size_t e = 0; e < slots.size(); ++e)
            for (const Item& it : slots[e])
              if (it.mb == m) return std::tuple{b, static_cast<int>(e), m};
        }
      return std::nullopt;
    }
    // Decisions are taken after every other event of the tick, so that simultaneous arrivals
    // share an execution.
    void kick(int gpu) {
      Runtime& rt = s.gpus[static_cast<std::size_t>(gpu)];
      if (rt.busy || rt.decide_pending) return;
      rt.decide_pending = true;
      s.sim.at(s.sim.now(), [this, gpu] { decide(gpu); }, EventPriority::kStart);
    }
    void decide(int gpu) {
      Runtime& rt = s.gpus[static_cast<std::size_t>(gpu)];
      rt.decide_pending = false;
      int b = 0, slot = 0, mb = -1;
      if (s.barrier) {
        const auto pick = pick_micro_batch(gpu);
        if (!pick) return;
        std::tie(b, slot, mb) = *pick;
      } else {
        const auto pick = pick_queue(s.config.schedule, rt.depth, s.config.defrag);
        if (!pick) return;
        std::tie(b, slot) = *pick;
      }
      auto& q = rt.queues[static_cast<std::size_t>(b)][static_cast<std::size_t>(slot)];
      std::vector<Item> batch;
      std::int64_t n = 0;
      if (mb >= 0) {
        // A micro-batch runs whole: every item of it, the others stay queued in order.
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
      while (mb < 0 && !q.empty() && (batch.empty() || n + q.front().tokens <= s.config.max_batch_tokens)) {
        n += q.front().tokens;
        batch.push_back(q.front());
        q.pop_front();
      }
      rt.depth[static_cast<std::size_t>(b)][static_cast<std::size_t>(slot)] -= n;
      rt.busy = true;
      const bool attention = gpu < s.config.attention_gpus;
      std::vector<Op> ops;
      if (attention) {
        std::vector<SeqChunk> chunks;
        for (const Item& it : batch) chunks.push_back(SeqChunk{it.tokens, it.context});
        ops = attention_step_ops(s.model, chunks);
        const bool moe = s.moe_index[static_cast<std::size_t>(b)] >= 0;
        const auto more = moe ? router_ops(s.model, n) : dense_ffn_ops(s.model, n);
        ops.insert(ops.end(), more.begin(), more.end());
        e.attention_tokens_[static_cast<std::size_t>(b)] += n;
        for (const Item& it : batch) {
          Request& r = e.requests_[static_cast<std::size_t>(it.request)];
          r.mark_scheduled(s.sim.now());
        }
      } else {
        ops = expert_ops(s.model, {n});
      }
      const Tick schedule = us_to_ticks(s.config.schedule_us);
      const Tick compute = s.cost.ops_time(ops);
      e.busy_[static_cast<std::size_t>(gpu)].scheduling += schedule;
      e.busy_[static_cast<std::size_t>(gpu)].compute += compute;
      ++e.executions_;
      e.executed_tokens_ += n;
      s.sim.after(schedule + compute, [this, gpu, b, batch = std::move(batch)]() mutable {
        s.gpus[static_cast<std::size_t>(gpu)].busy = false;
        if (gpu < s.config.attention_gpus) attention_done(gpu, b, batch);
        else expert_done(gpu, b, batch);
        kick(gpu);
      }, EventPriority::kCompletion);
    }
    // One message from `src` to `dst` GPU carrying `items`; `deliver` runs when it has arrived.
    void send(int src, int dst, double bytes, std::function<void()> deliver) {
      if (src == dst) {
        deliver();
        return;
      }
      // Priced as one NCCL send (price_p2p): its protocol's latency, then a flow at NCCL's link rate.
      const P2pPricing p = price_p2p(s.cluster, src, dst, bytes);
      if (bytes <= 0.0) {
        s.sim.after(p.launch, std::move(deliver));
        return;
      }
      s.sim.after(p.launch, [this, src, dst, wire = bytes * p.wire_scale, hop = p.hop, deliver = std::move(deliver)]() mutable {
        s.net->start_flow(s.cluster.route(s.cluster.gpu_endpoint(src), s.cluster.gpu_endpoint(dst)), wire,
                          std::move(deliver), hop);
      });
    }
    // Dispatcher after attention (§3.2): dense blocks continue locally; MoE blocks route every
    // token and send each expert GPU its selections, permuted by expert.
    void attention_done(int gpu, int b, const std::vector<Item>& batch) {
      const int moe = s.moe_index[static_cast<std::size_t>(b)];
      if (moe < 0) {
        for (const Item& it : batch) next_block(it, b);
        return;
      }
      std::int64_t n = 0;
      for (const Item& it : batch) n += it.tokens;
      Rng rng = Rng::derive(s.seed, Stream::kAmoeRouting, s.attention_runs++, static_cast<std::uint64_t>(moe));
      const LayerRouting r = s.routing.route(static_cast<int>(s.attention_runs - 1), moe, n, rng);
      const int G = s.cluster.num_gpus(), k = s.model.top_k;
      std::vector<std::vector<Item>> to(static_cast<std::size_t>(G));
      std::vector<std::int64_t> per_expert(static_cast<std::size_t>(s.model.experts));
      std::int64_t t0 = 0;
      for (const Item& it : batch) {
        std::fill(per_expert.begin(), per_expert.end(), 0);
        for (std::int64_t t = t0; t < t0 + it.tokens; ++t)
          for (int j = 0; j < k; ++j) ++per_expert[static_cast<std::size_t>(r.experts[static_cast<std::size_t>(t * k + j)])];
        t0 += it.tokens;
        s.pending[static_cast<std::size_t>(it.request)] = it.tokens * k;
        for (int ex = 0; ex < s.model.experts; ++ex)
          if (per_expert[static_cast<std::size_t>(ex)] > 0)
            to[static_cast<std::size_t>(amoe_expert_gpu(ex, s.config, G))].push_back(
                Item{it.request, per_expert[static_cast<std::size_t>(ex)], ex, gpu, it.mb});  // context: the expert
      }
      // Ping-pong's all-to-all reaches every expert GPU, with or without tokens for it.
      const int mb = s.barrier ? batch.front().mb : -1;
      for (int x = s.config.attention_gpus; x < G; ++x) {
        auto& items = to[static_cast<std::size_t>(x)];
        if (items.empty() && mb < 0) continue;
        double bytes = 0.0;
        for (const Item& it : items) bytes += static_cast<double>(it.tokens) * token_bytes(s.model);
        send(gpu, x, bytes, [this, x, b, mb, items = std::move(items)] {
          for (const Item& it : items) {
            const auto ex = static_cast<std::size_t>(it.context);
            e.expert_arrivals_[static_cast<std::size_t>(b)][ex] += it.tokens;
            enqueue(x, b, s.slot_of_expert[ex], Item{it.request, it.tokens, 0, it.home, it.mb});
          }
          if (mb >= 0) {
            s.barrier->message_arrived(x, b, mb);
            kick(x);
          }
        });
      }
    }
    // Dispatcher after an expert (§3.2): outputs go home, permuted by attention GPU; the token
    // pool releases a request's token once all k selections are back.
    void expert_done(int gpu, int b, const std::vector<Item>& batch) {
      std::vector<std::vector<Item>> home(static_cast<std::size_t>(s.config.attention_gpus));
      for (const Item& it : batch) home[static_cast<std::size_t>(it.home)].push_back(it);
      for (int a = 0; a < s.config.attention_gpus; ++a) {
        auto& items = home[static_cast<std::size_t>(a)];
        if (items.empty()) continue;
        double bytes = 0.0;
        for (const Item& it : items) bytes += static_cast<double>(it.tokens) * token_bytes(s.model);
        send(gpu, a, bytes, [this, b, items = std::move(items)] {
          for (const Item& it : items) {
            auto& left = s.pending[static_cast<std::size_t>(it.request)];
            left -= it.tokens;
            if (left == 0) {
              const Request& r = e.requests_[static_cast<std::size_t>(it.request)];
              next_block(Item{it.request, r.prefilling() ? r.prefill_target - r.computed : 1, r.computed, it.home, it.mb}, b);
            }
          }
        });
      }
    }
    void next_block(const Item& it, int b) {
      if (b + 1 < s.model.layers) {
        enqueue(it.home, b + 1, 0, it);
        return;
      }
      Request& r = e.requests_[static_cast<std::size_t>(it.request)];
      r.computed += it.tokens;
      ++r.generated;
      r.record_tokens(s.sim.now(), 1);
      const bool iteration_over = s.barrier && s.barrier->finish_item();
      if (!r.done()) {
        if (s.barrier) s.next_iteration.push_back(it.request);
        else enqueue(it.home, 0, 0, Item{it.request, 1, r.computed, it.home});
        if (iteration_over) start_iteration();
        return;
      }
      r.finish(s.sim.now());
      ++s.finished;
      s.kv[static_cast<std::size_t>(r.rank)].release(r.spec.id);
      --s.requests_on[static_cast<std::size_t>(r.rank)];
      if (s.arrival.process == ArrivalSpec::Process::kClosed && s.next_closed < e.requests_.size()) {
        const std::size_t i = s.next_closed++;
        s.sim.at(s.sim.now() + seconds_to_ticks(s.arrival.think_s), [this, i] { arrive(static_cast<int>(i)); });
      }
      admit_waiting();
      if (iteration_over) start_iteration();
    }
    // Ping-pong: the requests admitted so far form the next iteration, split round-robin into
    // the micro-batches in request order; each enters block 0 with its prompt or one token.
    void start_iteration() {
      if (s.barrier->running() || s.next_iteration.empty()) return;
      std::vector<int> active;
      active.swap(s.next_iteration);
      std::sort(active.begin(), active.end());
      const int M = s.barrier->micro_batches();
      std::vector<std::vector<std::int64_t>> items(static_cast<std::size_t>(s.config.attention_gpus),
                                                   std::vector<std::int64_t>(static_cast<std::size_t>(M), 0));
      for (std::size_t i = 0; i < active.size(); ++i)
        ++items[static_cast<std::size_t>(e.requests_[static_cast<std::size_t>(active[i])].rank)][i % static_cast<std::size_t>(M)];
      s.barrier->begin(items);
      for (std::size_t i = 0; i < active.size(); ++i) {
        const Request& r = e.requests_[static_cast<std::size_t>(active[i])];
        enqueue(r.rank, 0, 0,
                Item{active[i], r.prefilling() ? r.prefill_target - r.computed : 1, r.computed, r.rank,
                     static_cast<int>(i % static_cast<std::size_t>(M))});
      }
    }
    void arrive(int i) {
      Request& r = e.requests_[static_cast<std::size_t>(i)];
      r.arrive(s.sim.now());
      r.prefill_target = r.spec.prompt_tokens;
      s.waiting.push_back(i);
      admit_waiting();
    }
    // The load balancer (§3.1): the attention GPU with the most free KV blocks, oldest first.
    void admit_waiting() {
      while (!s.waiting.empty()) {
        Request& r = e.requests_[static_cast<std::size_t>(s.waiting.front())];
        const std::int64_t need = r.spec.prompt_tokens + r.spec.output_tokens;
        // Least loaded: the most free KV blocks (AMoE's load balancer, §3.1), or the fewest requests
        // (SGLang's data-parallel router); ties to the lowest GPU.
        auto load = [&](int a) {
          return s.config.place_by_requests ? -static_cast<double>(s.requests_on[static_cast<std::size_t>(a)])
                                            : static_cast<double>(s.kv[static_cast<std::size_t>(a)].free_blocks());
        };
        int best = -1;
        for (int a = 0; a < s.config.attention_gpus; ++a)
          if (s.kv[static_cast<std::size_t>(a)].can_grow(r.spec.id, need) && (best < 0 || load(a) > load(best))) best = a;
        if (best < 0) return;
        s.kv[static_cast<std::size_t>(best)].grow(r.spec.id, need);
        ++s.requests_on[static_cast<std::size_t>(best)];
        s.waiting.pop_front();
        r.rank = r.gpu = best;
        r.pool = 0;
        r.state = RequestState::kRunning;
        const int index = static_cast<int>(&r - e.requests_.data());
        if (s.barrier) {
          s.next_iteration.push_back(index);
          continue;
        }
        enqueue(best, 0, 0, Item{index, r.spec.prompt_tokens, 0, best});
      }
      if (s.barrier) start_iteration();
    }
  };
  auto steps = std::make_shared<Steps>(Steps{*this, s});
  if (s.arrival.process == ArrivalSpec::Process::kClosed) {
    const std::size_t clients = std::min<std::size_t>(static_cast<std::size_t>(s.arrival.clients), requests_.size());
    for (std::size_t i = 0; i < clients; ++i) s.sim.at(0, [steps, i] { steps->arrive(static_cast<int>(i)); });
    s.next_closed = clients;
  } else {
    for (std::size_t i = 0; i < requests_.size(); ++i)
      s.sim.at(requests_[i].spec.arrival, [steps, i] { steps->arrive(static_cast<int>(i)); });
  }
  s.sim.run();
  check_invariant(s.finished == static_cast<std::int64_t>(requests_.size()), Invariant::kRequestOnce, [&] {
    return "amoe: " + std::to_string(static_cast<std::int64_t>(requests_.size()) - s.finished) + " requests never finished";
  });
  for (std::size_t g = 0; g < s.kv.size(); ++g)
    check_invariant(s.kv[g].used_blocks() == 0, Invariant::kKvBalanced, [&] {
      return "amoe: attention GPU " + std::to_string(g) + " still holds " + std::to_string(s.kv[g].used_blocks()) +
             " KV blocks after every request finished";
    });
}

}  // namespace moesim
