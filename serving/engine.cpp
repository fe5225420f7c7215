#include "serving/engine.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/invariants.hpp"
#include "models/operators.hpp"
#include "serving/rank_load_index.hpp"
#include "serving/two_batch.hpp"
#include "sim/network_backend.hpp"
#include "hardware/host_cost.hpp"
#include "hardware/cluster_run.hpp"
#include "hardware/phase.hpp"

namespace moesim {

/// What one serving run owns: its cluster's simulator, network and executor (hardware/cluster_run.hpp),
/// with the kernels of a GPU that replays a CUDA graph priced as replayed.
struct ServingEngine::Engine {
  /// Per GPU: its step replays a CUDA graph, whose kernels pay graph_kernel_us each.
  std::vector<char> graph_mode;
  ClusterRun run;
  Simulator& sim = run.sim;
  PlanExecutor& exec = run.exec;
  Engine(const Cluster& cluster, const ComputeCostModel& cost, double graph_kernel_us, bool two_batch_overlap)
      : graph_mode(static_cast<std::size_t>(cluster.num_gpus()), 0), run(cluster, hooks(cluster, cost, graph_kernel_us)) {
    // Two-batch overlap: of the ready kernels, the one earliest in program order (layer, then
    // micro-batch) runs first, so that a micro-batch reaches its dispatch without waiting for the
    // other's work of the same layer (SGLang's TBO interleaves its operations that way).
    if (two_batch_overlap)
      exec.set_compute_chooser([](int, std::span<const ReadyTask> waiting) {
        std::size_t best = 0;
        const auto key = [](const ReadyTask& t) { return std::pair{t.task->layer, t.task->micro_batch}; };
        for (std::size_t i = 1; i < waiting.size(); ++i)
          if (key(waiting[i]) < key(waiting[best])) best = i;
        return best;
      });
  }

  PlanExecutor::Hooks hooks(const Cluster& cluster, const ComputeCostModel& cost, double graph_kernel_us) {
    PlanExecutor::Hooks h = engine_hooks(cluster, cost);
    h.compute_time = [this, &cost, graph_kernel_us](const Task& t, std::span<const Op> ops) {
      return graph_mode[static_cast<std::size_t>(t.gpu)] ? cost.ops_time(ops, graph_kernel_us) : cost.ops_time(ops);
    };
    return h;
  }
};

/// A pool's schedulers and the step in flight.
struct ServingEngine::PoolState {
  std::vector<RankScheduler> ranks;
  RankLoadIndex load;  ///< ranks' outstanding requests, for the router (kept by enqueue / retire)
  bool busy = false;
  bool start_pending = false;
  int next_step = 0;
  // The step in flight.
  std::vector<RankStep> rank_steps;
  std::shared_ptr<StepPlan> plan;
  std::vector<LayerRouting> routing;
  std::vector<Forecast> forecasts;
  Tick started = 0;
  int step = 0;
  LayerSample sample;  ///< the step's planned MoE layers
  std::vector<int> gpu_of, endpoint_of;  ///< pool view → cluster (empty: identical)
  /// The last step's shape: the next one starts from a fresh shape that takes over its per-GPU
  /// chunk lists, emptied, so that their memory is not allocated anew every step.
  StepShape shape;
};

ServingEngine::ServingEngine(ServingSetup setup, std::vector<ServingPool>& pools, std::vector<RequestSpec> requests)
    : setup_(std::move(setup)),
      pools_(pools),
      engine_(std::make_unique<Engine>(*setup_.cluster, *setup_.cost, setup_.scheduler.engine.graph_kernel_us,
                                       setup_.scheduler.two_batch_overlap)) {
  requests_.reserve(requests.size());
  for (auto& spec : requests) {
    Request r;
    r.spec = spec;
    requests_.push_back(std::move(r));
  }
  const Cluster& cluster = *setup_.cluster;
  for (const ServingPool& pool : pools_) {
    auto st = std::make_unique<PoolState>();
    for (int g = 0; g < pool.ranks(); ++g)
      st->ranks.emplace_back(setup_.scheduler, PagedKvCache(pool.kv_blocks[static_cast<std::size_t>(g)], setup_.scheduler.kv_block_tokens));
    st->load.reset(st->ranks.size());
    if (pool.gpus != cluster.num_gpus()) {
      for (int g = 0; g < pool.gpus; ++g) st->gpu_of.push_back(pool.first_gpu + g);
      for (int e = 0; e < pool.view->num_endpoints(); ++e) st->endpoint_of.push_back(pool.global_endpoint(e, cluster));
    }
    state_.push_back(std::move(st));
  }
  if (setup_.layer_queues) {
    LayerQueueRuntime::Hooks hooks;
    hooks.finished = [this](Request& r) { close_request(r); };
    hooks.executed = [this](const ExecutionRecord& rec) {
      if (execution_observer_) execution_observer_(rec);
    };
    hooks.sent = [this](const TaskGraph& graph, const std::vector<TaskTiming>& timing) {
      if (transfer_observer_) transfer_observer_(graph, timing);
    };
    queues_ = std::make_unique<LayerQueueRuntime>(*setup_.model, cluster, *setup_.routing, *setup_.layer_queues,
                                                  setup_.scheduler.kv_block_tokens, setup_.seed, engine_->sim,
                                                  engine_->exec, requests_, gaps_, std::move(hooks));
  }
}

ServingEngine::~ServingEngine() = default;

Tick ServingEngine::now() const { return engine_->sim.now(); }
std::uint64_t ServingEngine::events() const { return engine_->sim.events_run(); }

double ServingEngine::kv_cache_peak_fraction() const {
  double peak = queues_ ? queues_->kv_cache_peak_fraction() : 0.0;
  for (const auto& st : state_)
    for (const RankScheduler& r : st->ranks)
      if (r.cache().total_blocks() > 0)
        peak = std::max(peak, static_cast<double>(r.cache().peak_used_blocks()) / static_cast<double>(r.cache().total_blocks()));
  return peak;
}

void ServingEngine::run() {
  Simulator& sim = engine_->sim;
  if (setup_.arrival.process == ArrivalSpec::Process::kClosed) {
    const std::size_t clients = std::min<std::size_t>(static_cast<std::size_t>(setup_.arrival.clients), requests_.size());
    for (std::size_t i = 0; i < clients; ++i) sim.at(0, [this, i] { arrive(i); });
    next_closed_ = clients;
  } else {
    for (std::size_t i = 0; i < requests_.size(); ++i) sim.at(requests_[i].spec.arrival, [this, i] { arrive(i); });
  }
  sim.run();
  check_invariant(finished_ == static_cast<std::int64_t>(requests_.size()), Invariant::kRequestOnce, [&] {
    return "serving stalled: " + std::to_string(static_cast<std::int64_t>(requests_.size()) - finished_) +
           " requests never finished";
  });
  if (queues_) queues_->check_drained();
  for (std::size_t p = 0; p < state_.size(); ++p)
    for (std::size_t g = 0; g < state_[p]->ranks.size(); ++g) {
      const PagedKvCache& kv = state_[p]->ranks[g].cache();
      check_invariant(kv.used_blocks() == 0, Invariant::kKvBalanced, [&] {
        return "pool " + std::to_string(p) + " rank " + std::to_string(g) + " still holds " +
               std::to_string(kv.used_blocks()) + " KV blocks after every request finished";
      });
    }
}

int ServingEngine::least_loaded_rank(const PoolState& p) const { return p.load.least_loaded(); }

void ServingEngine::enqueue_at(int pool, int rank, Request& r) {
  PoolState& p = *state_[static_cast<std::size_t>(pool)];
  RankScheduler& s = p.ranks[static_cast<std::size_t>(rank)];
  s.enqueue(&r);
  p.load.set(static_cast<std::size_t>(rank), s.outstanding());
}

void ServingEngine::retire_from(int pool, int rank, Request& r) {
  PoolState& p = *state_[static_cast<std::size_t>(pool)];
  RankScheduler& s = p.ranks[static_cast<std::size_t>(rank)];
  s.retire(&r);
  p.load.set(static_cast<std::size_t>(rank), s.outstanding());
}

std::vector<int> ServingEngine::entry_pools() const {
  std::vector<int> out;
  const bool to_decode = setup_.prompt_cached &&
                         std::any_of(pools_.begin(), pools_.end(), [](const ServingPool& p) { return p.role == PoolRole::kDecode; });
  for (int i = 0; i < static_cast<int>(pools_.size()); ++i) {
    const PoolRole role = pools_[static_cast<std::size_t>(i)].role;
    if (to_decode ? role == PoolRole::kDecode : role != PoolRole::kDecode) out.push_back(i);
  }
  return out;
}

void ServingEngine::set_graph_mode(int pool, bool on) {
  const ServingPool& sp = pools_[static_cast<std::size_t>(pool)];
  for (int g = 0; g < sp.gpus; ++g) engine_->graph_mode[static_cast<std::size_t>(sp.first_gpu + g)] = on ? 1 : 0;
}

// A new request goes to the rank with the fewest requests over every pool it may enter (every
// instance's ranks, or the prefill pools'): SGLang's data-parallel attention router and the
// engines' load balancers balance by load; ties go to the first.
void ServingEngine::arrive(std::size_t index) {
  Request& r = requests_[index];
  r.arrive(now());
  if (queues_) {
    queues_->arrive(static_cast<int>(index));
    return;
  }
  int pool = -1, rank = 0;
  std::size_t load = 0;
  for (const int i : entry_pools()) {
    const PoolState& st = *state_[static_cast<std::size_t>(i)];
    const int best = least_loaded_rank(st);
    const std::size_t l = st.ranks[static_cast<std::size_t>(best)].outstanding();
    if (pool < 0 || l < load) pool = i, rank = best, load = l;
  }
  const ServingPool& sp = pools_[static_cast<std::size_t>(pool)];
  r.pool = pool;
  r.rank = rank;
  r.gpu = sp.first_gpu + rank * sp.tensor_parallel;
  r.prefill_target = r.spec.prompt_tokens;
  if (setup_.prompt_cached) r.computed = r.spec.prompt_tokens;  // its blocks are taken at admission
  r.prefill_only = sp.role == PoolRole::kPrefill && r.spec.output_tokens > 1;
  enqueue_at(pool, rank, r);
  request_step(pool);
}

// Steps start after every other event of the tick (arrivals, completions), so simultaneous
// arrivals share a step.
void ServingEngine::request_step(int pool) {
  PoolState& p = *state_[static_cast<std::size_t>(pool)];
  if (p.busy || p.start_pending) return;
  p.start_pending = true;
  engine_->sim.at(now(), [this, pool] {
    state_[static_cast<std::size_t>(pool)]->start_pending = false;
    start_step(pool);
  }, EventPriority::kStart);
}

void ServingEngine::start_step(int pool) {
  PoolState& p = *state_[static_cast<std::size_t>(pool)];
  ServingPool& sp = pools_[static_cast<std::size_t>(pool)];
  if (p.busy) return;
  const ModelSpec& m = *setup_.model;
  const double kv_bytes = kv_cache_bytes_per_token(m);
  p.rank_steps.clear();
  {
    StepShape fresh;
    fresh.seqs = std::move(p.shape.seqs);
    fresh.draft_seqs = std::move(p.shape.draft_seqs);
    fresh.swap_out_bytes = std::move(p.shape.swap_out_bytes);
    fresh.swap_in_bytes = std::move(p.shape.swap_in_bytes);
    for (auto& chunks : fresh.seqs) chunks.clear();
    for (auto& chunks : fresh.draft_seqs) chunks.clear();
    if (!setup_.scheduler.speculative.enabled()) fresh.draft_seqs.clear();  // empty unless drafting
    p.shape = std::move(fresh);
  }
  StepShape& shape = p.shape;
  shape.seqs.resize(static_cast<std::size_t>(sp.gpus));
  shape.swap_out_bytes.assign(static_cast<std::size_t>(sp.gpus), 0.0);
  shape.swap_in_bytes.assign(static_cast<std::size_t>(sp.gpus), 0.0);
  // Count-level routing when the scenario allows it (issue 13); else token by token, each token
  // known by its request and position.
  const bool by_count = setup_.count_level;
  const EngineProfile& engine = setup_.scheduler.engine;
  const int tp = sp.tensor_parallel;
  shape.attention_tp = tp;
  shape.tp_experts = !sp.expert_parallel;
  shape.moe_expert_parallel = sp.moe_expert_parallel;
  const SpeculativeConfig& spec = setup_.scheduler.speculative;
  shape.mla_absorbed_max_new = std::max<std::int64_t>(kMlaAbsorbedMaxNewTokens, spec.verify_tokens());
  if (spec.enabled()) {
    shape.draft = &spec.draft;
    shape.draft_passes = spec.draft_tokens;
    shape.draft_mtp = spec.method == SpeculativeConfig::Method::kMtp;
    shape.draft_seqs.resize(static_cast<std::size_t>(sp.gpus));
  }
  std::vector<TokenRef> tokens;
  bool any = false, decode_only = true;
  std::int64_t busiest_seqs = 0, busiest_tokens = 0;
  for (int g = 0; g < sp.ranks(); ++g) {
    RankStep rs = p.ranks[static_cast<std::size_t>(g)].schedule(now());
    preemptions_ += rs.preemptions;
    // A rank's KV cache lives on each GPU of its group; swaps are counted at its first GPU.
    const auto home = static_cast<std::size_t>(g * tp);
    shape.swap_out_bytes[home] = static_cast<double>(rs.swap_out_tokens) * kv_bytes;
    shape.swap_in_bytes[home] = static_cast<double>(rs.swap_in_tokens) * kv_bytes;
    for (const ScheduledChunk& c : rs.chunks) {
      shape.seqs[home].push_back(SeqChunk{c.new_tokens, c.context});
      const bool decode = !c.prefill;
      decode_only = decode_only && decode;
      // Drafts are proposed for sequences that decode (a verify step with at least one draft).
      if (spec.enabled() && decode && c.new_tokens > 1) shape.draft_seqs[home].push_back(SeqChunk{1, c.context + 1});
      if (!by_count)
        for (std::int64_t j = 0; j < c.new_tokens; ++j) tokens.push_back(TokenRef{c.request->spec.id, c.context + j});
    }
    any = any || !rs.chunks.empty();
    busiest_seqs = std::max(busiest_seqs, static_cast<std::int64_t>(rs.chunks.size()));
    busiest_tokens = std::max(busiest_tokens, rs.new_tokens());
    p.rank_steps.push_back(std::move(rs));
  }
  if (!any) return;  // idle until an arrival or a KV hand-over

  // A decode-only step whose every rank fits a captured size replays the CUDA graph of that
  // size: each rank's batch is padded to it (padding rows run through every kernel, attending
  // one cached position) and its kernels skip the eager launch cost. Otherwise kernels launch
  // one by one.
  bool graph = engine.cuda_graphs && decode_only;
  for (int g = 0; g < sp.ranks() && graph; ++g) {
    const std::size_t n = shape.seqs[static_cast<std::size_t>(g * tp)].size();
    graph = n == 0 || engine.graph_size_for(static_cast<std::int64_t>(n)) > 0;
  }
  if (graph) {
    for (int g = 0; g < sp.ranks(); ++g) {
      auto& chunks = shape.seqs[static_cast<std::size_t>(g * tp)];
      if (chunks.empty()) continue;  // an idle rank launches nothing
      const std::int64_t pad = engine.graph_size_for(static_cast<std::int64_t>(chunks.size())) -
                               static_cast<std::int64_t>(chunks.size());
      // Padding rows are inserted after the rank's own (tokens are laid out rank by rank).
      std::size_t at = 0;
      if (!by_count)
        for (int h = 0; h <= g; ++h)
          for (const SeqChunk& c : shape.seqs[static_cast<std::size_t>(h * tp)]) at += static_cast<std::size_t>(c.new_tokens);
      for (std::int64_t j = 0; j < pad; ++j) {
        chunks.push_back(SeqChunk{spec.verify_tokens(), 1});
        if (spec.enabled()) shape.draft_seqs[static_cast<std::size_t>(g * tp)].push_back(SeqChunk{1, 1});
        if (!by_count)
          for (std::int64_t q = 0; q < spec.verify_tokens(); ++q)
            tokens.insert(tokens.begin() + static_cast<std::ptrdiff_t>(at++),
                          TokenRef{-1 - static_cast<std::int64_t>(g), j * spec.verify_tokens() + q});
      }
    }
  }
  set_graph_mode(pool, graph);
  if (engine.active()) {
    // The engine profile gives the step's host time on the host it was measured on; the host
    // cost model prices it here. None when it rounds to no time, as a delay of it would.
    const double host = engine.host_us(busiest_seqs, busiest_tokens) + (graph ? engine.graph_launch_us : 0.0);
    if (us_to_ticks(host) > 0) shape.host.push_back(host_work("engine.step", busiest_seqs, host * 1e-6));
    shape.host_overlap = engine.host_overlap;
    if (us_to_ticks(engine.host_serial_us) > 0)
      shape.serial_host.push_back(host_work("engine.serial", busiest_seqs, engine.host_serial_us * 1e-6));
    const double issue = graph ? 0.0 : engine.eager_dispatch_us(m.layers, m.num_moe_layers());
    if (us_to_ticks(issue) > 0) shape.serial_host.push_back(host_work("engine.eager_issue", m.layers, issue * 1e-6));
  }

  p.step = p.next_step++;
  p.started = now();
  const int moe_layers = m.num_moe_layers();
  shape.sample = LayerSample{setup_.scheduler.layer_sampling, p.step};
  const auto ustep = static_cast<std::uint64_t>(p.step);
  p.routing.clear();
  p.forecasts.clear();
  // Routing per MoE layer, from the streams of (pool, step, layer): the whole step's, or under
  // two-batch overlap each micro-batch's (the first from the step's own streams).
  const auto route = [&](const StepShape& part, const std::vector<TokenRef>& part_tokens, Stream stream) {
    std::vector<LayerRouting> out;
    const std::vector<std::int64_t> home = part.home_tokens();
    for (int l = 0, next = shape.sample.next_planned(0, moe_layers); l < moe_layers; ++l) {
      if (l != next) {  // left out by layer sampling: never read
        out.emplace_back();
        continue;
      }
      next = shape.sample.next_planned(l + 1, moe_layers);
      Rng rng = Rng::derive(setup_.seed, stream, pool, ustep, l);
      out.push_back(by_count ? setup_.routing->route_counts(p.step, l, home, rng)
                             : setup_.routing->route_tokens(p.step, l, part_tokens, rng));
    }
    return out;
  };
  const std::optional<TwoBatches> halves =
      setup_.scheduler.two_batch_overlap ? split_two_batches(shape, by_count ? std::vector<TokenRef>{} : tokens)
                                         : std::nullopt;
  // The predictors forecast and observe the first micro-batch's routing under two-batch overlap.
  p.routing = halves ? route(halves->first, halves->first_tokens, Stream::kStepRouting)
                     : route(shape, tokens, Stream::kStepRouting);
  for (int l = 0, next = shape.sample.next_planned(0, moe_layers); l < moe_layers; ++l) {
    if (l != next) {
      p.forecasts.emplace_back();
      continue;
    }
    next = shape.sample.next_planned(l + 1, moe_layers);
    Rng rng = Rng::derive(setup_.seed, Stream::kStepPredictor, pool, ustep, l);
    p.forecasts.push_back(sp.predictor->forecast(p.step, l, p.routing[static_cast<std::size_t>(l)], rng));
  }
  p.sample = shape.sample;
  // The last step's plan is rebuilt in place once nothing else holds it (its pages and op
  // storage reused; a fresh plan every step spent its time allocating).
  if (!p.plan || p.plan.use_count() > 1) p.plan = std::make_shared<StepPlan>();
  if (halves)
    plan_two_batch_step_into(*p.plan, *sp.policy, *sp.ctx, p.step, halves->first, halves->second, p.routing,
                             route(halves->second, halves->second_tokens, Stream::kSecondMicroBatchRouting), &p.forecasts);
  else
    plan_step_into(*p.plan, *sp.policy, *sp.ctx, p.step, shape, p.routing, &p.forecasts);
  if (!p.gpu_of.empty()) p.plan->graph.remap(p.gpu_of, p.endpoint_of);
  p.busy = true;
  ++steps_;
  // One pool (and no layer queues) runs nothing beside its step: the executor replays the step's
  // events at once (PlanExecutor::submit_alone; same timings, same order of events).
  std::shared_ptr<const TaskGraph> plan(p.plan, &p.plan->graph);
  auto done = [this, pool](GraphId, std::vector<TaskTiming>&& timing) { finish_step(pool, std::move(timing)); };
  if (pools_.size() == 1 && !queues_)
    engine_->exec.submit_alone(std::move(plan), std::move(done));
  else
    engine_->exec.submit(std::move(plan), std::move(done));
}

void ServingEngine::finish_step(int pool, std::vector<TaskTiming>&& timing) {
  PoolState& p = *state_[static_cast<std::size_t>(pool)];
  ServingPool& sp = pools_[static_cast<std::size_t>(pool)];
  StepRecord rec;
  rec.pool = pool;
  rec.step = p.step;
  rec.start = p.started;
  rec.end = now();
  for (const RankStep& rs : p.rank_steps) {
    rec.preemptions += rs.preemptions;
    for (const ScheduledChunk& c : rs.chunks)
      (c.prefill ? rec.prefill_tokens : rec.decode_tokens) += c.new_tokens;
  }
  const int moe_layers = static_cast<int>(p.routing.size());
  for (int l = p.sample.next_planned(0, moe_layers); l < moe_layers; l = p.sample.next_planned(l + 1, moe_layers))
    rec.skewness.push_back(p.routing[static_cast<std::size_t>(l)].skewness());
  rec.forecasts = &p.forecasts;
  rec.plan = p.plan.get();
  rec.timing = &timing;
  if (step_observer_) step_observer_(rec);
  engine_->exec.recycle_timing(std::move(timing));
  for (int l = p.sample.next_planned(0, moe_layers); l < moe_layers; l = p.sample.next_planned(l + 1, moe_layers))
    sp.predictor->observe(p.step, l, p.routing[static_cast<std::size_t>(l)]);

  p.busy = false;
  // Speculative decoding: drafts are accepted in order, each with the configured probability
  // given the previous one was; the first rejection ends the accepted prefix.
  const SpeculativeConfig& spec = setup_.scheduler.speculative;
  const RankScheduler::AcceptDrafts accept = [this, &spec](const Request& r, std::int64_t drafts) {
    Rng rng = Rng::derive(setup_.seed, Stream::kDraftAcceptance, r.spec.id, r.generated);
    std::int64_t a = 0;
    while (a < drafts && rng.uniform01() < spec.acceptance_rate) ++a;
    return a;
  };
  for (std::size_t g = 0; g < p.rank_steps.size(); ++g)
    for (Request* r : p.ranks[g].complete(p.rank_steps[g], spec.enabled() ? accept : RankScheduler::AcceptDrafts{}))
      produced_token(pool, *r);
  p.rank_steps.clear();
  if (!awaiting_transfer_.empty()) try_transfers();
  request_step(pool);
  if (progress_) progress_(now(), finished_, static_cast<std::int64_t>(requests_.size()));
}

void ServingEngine::produced_token(int pool, Request& r) {
  if (r.prefill_only && pools_[static_cast<std::size_t>(pool)].role == PoolRole::kPrefill) {
    // The first token exists on the prefill GPU; the user sees it once the KV cache has moved.
    r.state = RequestState::kTransferring;
    awaiting_transfer_.push_back(&r);
    return;
  }
  // Tokens that came out together (a speculative step's accepted drafts) share the gap: one
  // inter-token latency per token, so that ITL and TPOT count output tokens.
  r.record_tokens(now(), r.emitted, gaps_);
  if (r.done()) finish_request(r);
}

// Prefilled requests move, oldest first, to the decode GPU with the fewest requests among those
// that take them (room for their KV cache, and no preempted request waiting there first); the
// blocks are reserved before the transfer starts.
void ServingEngine::try_transfers() {
  while (!awaiting_transfer_.empty()) {
    Request& r = *awaiting_transfer_.front();
    int best_pool = -1, best = -1;
    for (int i = 0; i < static_cast<int>(pools_.size()); ++i) {
      if (pools_[static_cast<std::size_t>(i)].role != PoolRole::kDecode) continue;
      const PoolState& d = *state_[static_cast<std::size_t>(i)];
      for (int g = 0; g < static_cast<int>(d.ranks.size()); ++g) {
        const RankScheduler& rank = d.ranks[static_cast<std::size_t>(g)];
        if (!rank.takes_handover(r)) continue;
        if (best < 0 || rank.outstanding() < state_[static_cast<std::size_t>(best_pool)]->ranks[static_cast<std::size_t>(best)].outstanding())
          best_pool = i, best = g;
      }
    }
    if (best < 0) return;  // retried after the next step (a decode finished or readmitted)
    awaiting_transfer_.erase(awaiting_transfer_.begin());
    state_[static_cast<std::size_t>(best_pool)]->ranks[static_cast<std::size_t>(best)].cache().grow(r.spec.id, r.computed);
    hand_over_to(r, best_pool, best);
  }
}

void ServingEngine::hand_over_to(Request& r, int decode, int rank) {
  const ServingPool& from = pools_[static_cast<std::size_t>(r.pool)];
  const ServingPool& to = pools_[static_cast<std::size_t>(decode)];
  const Cluster& cluster = *setup_.cluster;
  const ModelSpec& m = *setup_.model;
  // The prompt's KV cache and, for a linear-attention model, the sequence's state go over.
  const double bytes = static_cast<double>(r.computed) * kv_cache_bytes_per_token(m) + linear_state_bytes_per_sequence(m);
  const int src_gpu = from.first_gpu + r.rank * from.tensor_parallel;
  const int src = cluster.gpu_endpoint(src_gpu);
  const int dst = cluster.gpu_endpoint(to.first_gpu + rank * to.tensor_parallel);
  auto graph = std::make_shared<TaskGraph>();
  graph->transfer(src, dst, bytes, phase::kOther, -1, {}, src_gpu);
  engine_->exec.submit(graph, [this, &r, decode, rank, graph](GraphId, std::vector<TaskTiming>&& timing) {
    if (transfer_observer_) transfer_observer_(*graph, timing);
    const int prefill_pool = r.pool;
    RankScheduler& source = state_[static_cast<std::size_t>(prefill_pool)]->ranks[static_cast<std::size_t>(r.rank)];
    RankScheduler& target = state_[static_cast<std::size_t>(decode)]->ranks[static_cast<std::size_t>(rank)];
    retire_from(prefill_pool, r.rank, r);
    // The blocks move whole: none left on the prefill GPU, the decode GPU holding the context.
    check_invariant(source.cache().held_blocks(r.spec.id) == 0 &&
                        target.cache().held_blocks(r.spec.id) == target.cache().blocks_for(r.computed),
                    Invariant::kKvHandOver, [&] {
                      return "request " + std::to_string(r.spec.id) + " of " + std::to_string(r.computed) + " tokens: " +
                             std::to_string(source.cache().held_blocks(r.spec.id)) + " blocks left on the prefill GPU, " +
                             std::to_string(target.cache().held_blocks(r.spec.id)) + " on the decode GPU";
                    });
    r.hand_over(now(), decode, rank,
                pools_[static_cast<std::size_t>(decode)].first_gpu + rank * pools_[static_cast<std::size_t>(decode)].tensor_parallel);
    enqueue_at(decode, rank, r);
    request_step(decode);
    request_step(prefill_pool);  // its blocks are free again
  });
}

void ServingEngine::finish_request(Request& r) {
  retire_from(r.pool, r.rank, r);
  close_request(r);
  if (!awaiting_transfer_.empty()) try_transfers();
  request_step(r.pool);
}

void ServingEngine::close_request(Request& r) {
  r.finish(now());
  ++finished_;
  if (setup_.arrival.process == ArrivalSpec::Process::kClosed && next_closed_ < requests_.size()) {
    const std::size_t i = next_closed_++;
    engine_->sim.at(now() + seconds_to_ticks(setup_.arrival.think_s), [this, i] { arrive(i); });
  }
  // A step reports progress when it ends; the layer-queue mode, which has no steps, when a
  // request finishes.
  if (queues_ && progress_) progress_(now(), finished_, static_cast<std::int64_t>(requests_.size()));
}

}  // namespace moesim
