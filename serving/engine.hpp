#pragma once
// The serving engine: a workload driver on top of the executor. Arrivals are events; each pool
// runs one step at a time, formed when the previous one ends (continuous batching: decisions are
// made when an event fires, Vidur-style), from its ranks' schedulers; the step planner turns it
// into a task graph and the executor times it while other pools' steps and KV transfers run.
// An attention–expert split runs in layer-queue mode instead of steps (serving/amoe/layer_queues.hpp):
// the runtime forms each GPU's next execution from its μ-queues and the engine's executor times it.
// Disaggregated: a prefill pool's finished prompt moves its KV cache to a decode GPU as a flow
// over the real topology, and the request decodes there. An instance of the model is a pool;
// a new request goes to the rank with the fewest requests over every pool it may enter. What the
// engine spends outside kernels (host time, CUDA-graph padding and launches) follows the
// scheduler config's EngineProfile.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "models/routing.hpp"
#include "serving/amoe/layer_queues.hpp"
#include "serving/config.hpp"
#include "serving/pool.hpp"
#include "serving/request.hpp"
#include "serving/serving_outcome.hpp"
#include "serving/scheduler.hpp"
#include "serving/step_planner.hpp"
#include "serving/workload.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

/// What one executed step looked like (for metrics and traces).
struct StepRecord {
  int pool = 0;
  int step = 0;      ///< the pool's step number
  Tick start = 0;
  Tick end = 0;
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t preemptions = 0;
  std::vector<double> skewness;  ///< per MoE layer
  const std::vector<Forecast>* forecasts = nullptr;
  const StepPlan* plan = nullptr;               ///< mapped onto the real GPUs
  const std::vector<TaskTiming>* timing = nullptr;
};

/// Everything the engine needs besides its pools.
struct ServingSetup {
  const ModelSpec* model = nullptr;
  const Cluster* cluster = nullptr;
  const ComputeCostModel* cost = nullptr;
  const RoutingModel* routing = nullptr;
  SchedulerConfig scheduler;
  ArrivalSpec arrival;  ///< closed loop: clients and think time
  std::uint64_t seed = 1;
  /// Route steps at count level (selections per (GPU, expert)): app/run_context.hpp decides.
  bool count_level = false;
  /// workload.prompt_cached: requests arrive with their prompt already in the KV cache of the
  /// rank that decodes them, so only decode steps run (steady-state decode measurements).
  bool prompt_cached = false;
  /// An attention–expert split run in layer-queue mode (AMoE's μ-queues, or ping-pong): the
  /// engine then has no pools, and the runtime of serving/amoe/layer_queues.hpp executes.
  const LayerQueueDeployment* layer_queues = nullptr;
};

/// Runs requests through the pools until every one has finished.
class ServingEngine final : public ServingOutcome {
 public:
  using StepObserver = std::function<void(const StepRecord&)>;
  using TransferObserver = std::function<void(const TaskGraph&, const std::vector<TaskTiming>&)>;
  using Progress = std::function<void(Tick now, std::int64_t finished, std::int64_t total)>;
  using ExecutionObserver = std::function<void(const ExecutionRecord&)>;

  ServingEngine(ServingSetup setup, std::vector<ServingPool>& pools, std::vector<RequestSpec> requests);
  ~ServingEngine() override;

  void on_step(StepObserver f) { step_observer_ = std::move(f); }
  /// KV hand-overs between pools, and the layer-queue mode's messages.
  void on_transfer(TransferObserver f) { transfer_observer_ = std::move(f); }
  /// The layer-queue mode's executions (one layer on one GPU).
  void on_execution(ExecutionObserver f) { execution_observer_ = std::move(f); }
  void on_progress(Progress f) { progress_ = std::move(f); }

  /// Simulates until every request has finished. Throws std::logic_error if requests remain
  /// when no event is left (a scheduling bug, never an input).
  void run();

  const std::vector<Request>& requests() const override { return requests_; }
  const InterTokenGaps& inter_token_gaps() const override { return gaps_; }
  /// Peak share of KV blocks in use on any GPU of any pool.
  double kv_cache_peak_fraction() const override;
  std::int64_t preemptions() const override { return preemptions_; }
  std::int64_t steps() const { return steps_; }
  Tick now() const override;
  std::uint64_t events() const;
  /// The layer-queue runtime (null when the engine runs steps).
  const LayerQueueRuntime* layer_queues() const { return queues_.get(); }

 private:
  struct PoolState;
  void arrive(std::size_t index);
  void request_step(int pool);
  void start_step(int pool);
  void finish_step(int pool, std::vector<TaskTiming>&& timing);
  void produced_token(int pool, Request& r);
  void hand_over_to(Request& r, int decode_pool, int rank);
  void try_transfers();
  void finish_request(Request& r);
  /// What every mode does when a request's last token is out: finish it, send the closed loop's
  /// next request.
  void close_request(Request& r);
  int least_loaded_rank(const PoolState& p) const;
  /// Queues `r` on a rank / removes it from one, keeping the pool's load index current.
  void enqueue_at(int pool, int rank, Request& r);
  void retire_from(int pool, int rank, Request& r);
  /// The pools a new request may enter: colocated or prefill pools (decode pools when prompts
  /// are cached), in order.
  std::vector<int> entry_pools() const;
  /// Marks the GPUs of `pool` as replaying a CUDA graph (their kernels priced accordingly).
  void set_graph_mode(int pool, bool on);

  ServingSetup setup_;
  std::vector<ServingPool>& pools_;
  std::vector<Request> requests_;
  InterTokenGaps gaps_;  ///< the requests' inter-token gaps, each distinct value once
  std::vector<std::unique_ptr<PoolState>> state_;
  struct Engine;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<LayerQueueRuntime> queues_;
  std::vector<Request*> awaiting_transfer_;  ///< prefilled, waiting for KV blocks on a decode GPU
  std::size_t next_closed_ = 0;              ///< closed loop: next request to send
  std::int64_t finished_ = 0;
  std::int64_t preemptions_ = 0;
  std::int64_t steps_ = 0;
  StepObserver step_observer_;
  TransferObserver transfer_observer_;
  ExecutionObserver execution_observer_;
  Progress progress_;
};

}  // namespace moesim
