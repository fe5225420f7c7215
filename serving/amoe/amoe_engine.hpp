#pragma once
// AMoE (asynchronous expert parallelism) on the serving workload: no step, no barrier. Attention
// GPUs run every block's attention data-parallel, each request bound to one of them with its KV
// cache (§3.1, §3.3); expert GPUs host expert e of every block (§3.3). Every GPU keeps a μ-queue
// per layer it hosts (§3.2); whenever it is idle its scheduler (§3.4) picks a queue, the GPU
// executes that layer on what is queued, and the outputs travel point to point to the next layer's
// GPU: attention → the experts the router picked, expert → the token's attention GPU for the
// next block. With top-k > 1 a token's k outputs meet in the token pool before the next block's
// attention (§3.2). A request's prompt enters block 0 as one token batch; after the last block
// each request emits a token and, until it is done, re-enters block 0 with one decode token.
#include <cstdint>
#include <memory>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "serving/amoe/layer_scheduler.hpp"
#include "serving/config.hpp"
#include "serving/request.hpp"
#include "serving/serving_outcome.hpp"
#include "serving/workload.hpp"

namespace moesim {

/// The `amoe` policy's options.
struct AmoeConfig {
  int attention_gpus = 0;                 ///< GPUs [0, attention_gpus) attend; the rest host experts
  LayerSchedule schedule = LayerSchedule::kDefrag;
  DefragParams defrag;
  std::int64_t max_batch_tokens = 8192;   ///< most tokens one execution drains from a queue
  double schedule_us = 10.0;              ///< host time of one scheduling decision
  /// 0: AMoE's asynchronous μ-queues. n >= 1: synchronous ping-pong over the same deployment
  /// (micro_batches.hpp): iterations of n micro-batches, each a barrier per block.
  int micro_batches = 0;
  /// Where a new request goes: the attention GPU with the most free KV blocks (false, AMoE §3.1)
  /// or with the fewest requests (true).
  bool place_by_requests = false;
};

/// Which expert GPU hosts expert e (of every block): e mod expert GPUs, so experts are spread
/// evenly when they outnumber the GPUs (§3.3).
int amoe_expert_gpu(int expert, const AmoeConfig& c, int gpus);

/// Runs one serving workload through an AMoE deployment.
class AmoeEngine final : public ServingOutcome {
 public:
  /// Busy time per GPU, split as the serving metrics split it.
  struct GpuBusy {
    Tick compute = 0;     ///< layers executing
    Tick scheduling = 0;  ///< scheduler decisions
  };

  AmoeEngine(const ModelSpec& model, const Cluster& cluster, const ComputeCostModel& cost, const RoutingModel& routing,
             const AmoeConfig& config, const SchedulerConfig& serving, const ArrivalSpec& arrival,
             std::vector<std::int64_t> kv_blocks, std::uint64_t seed, std::vector<RequestSpec> requests);
  ~AmoeEngine() override;

  /// Simulates until every request has finished. Throws std::logic_error if tokens remain queued
  /// when no event is left (a bug, never an input).
  void run();

  const std::vector<Request>& requests() const override { return requests_; }
  double kv_cache_peak_fraction() const override;
  std::int64_t preemptions() const override { return 0; }
  Tick now() const override;
  std::uint64_t events() const;
  const std::vector<GpuBusy>& gpu_busy() const { return busy_; }
  /// Executions per GPU and tokens they covered (for tests and batch-size metrics).
  std::int64_t executions() const { return executions_; }
  std::int64_t executed_tokens() const { return executed_tokens_; }
  /// Selections that reached each (block, expert) queue over the run: tokens × top-k per block.
  const std::vector<std::vector<std::int64_t>>& expert_arrivals() const { return expert_arrivals_; }
  /// Tokens each block's attention executed over the run.
  const std::vector<std::int64_t>& attention_tokens() const { return attention_tokens_; }

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::vector<Request> requests_;
  std::vector<GpuBusy> busy_;
  std::int64_t executions_ = 0, executed_tokens_ = 0;
  std::vector<std::vector<std::int64_t>> expert_arrivals_;
  std::vector<std::int64_t> attention_tokens_;
};

}  // namespace moesim
