#pragma once
// The layer-queue execution mode of the serving engine (serving/engine.hpp), for an
// attention–expert split: AMoE's asynchronous expert parallelism, and synchronous ping-pong over
// the same split. Attention GPUs run every block's attention data-parallel, each request bound to
// one of them with its KV cache (§3.1, §3.3); expert GPUs host expert e of every block (§3.3).
// Every GPU keeps a μ-queue per layer it hosts (§3.2); whenever it is idle its scheduler (§3.4)
// picks a queue, the GPU executes that layer on what is queued, and the outputs travel point to
// point to the next layer's GPU: attention → the experts the router picked, expert → the token's
// attention GPU for the next block. With top-k > 1 a token's k outputs meet in the token pool
// before the next block's attention (§3.2). A request's prompt enters block 0 as one token batch;
// after the last block each request emits a token and, until it is done, re-enters block 0 with
// one decode token.
//
// The runtime decides; the engine times. An execution is a task graph (the scheduling decision,
// then the layer's kernels as one compute task on the GPU's stream) and a message a task graph
// (NCCL's launch, then a flow), both submitted to the serving engine's executor, so they are
// priced by the same hooks, traced and metered like a step's tasks. Arrivals, the closed loop,
// finishing and progress are the engine's.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "serving/amoe/layer_scheduler.hpp"
#include "serving/request.hpp"
#include "sim/plan_executor.hpp"

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

/// An attention–expert split and how it executes: what ServingSetup::layer_queues names.
struct LayerQueueDeployment {
  AmoeConfig config;
  std::vector<std::int64_t> kv_blocks;  ///< per attention GPU
};

/// Which expert GPU hosts expert e (of every block): e mod expert GPUs, so experts are spread
/// evenly when they outnumber the GPUs (§3.3).
int amoe_expert_gpu(int expert, const AmoeConfig& c, int gpus);

/// One layer executed on one GPU, as the engine reports it.
struct ExecutionRecord {
  int gpu = 0;
  int block = 0;
  bool attention = false;
  std::int64_t tokens = 0;
  std::int64_t prefill_tokens = 0;   ///< of `tokens`, those of requests still prefilling
  Tick start = 0, end = 0;           ///< the decision's start, the kernels' end
  const TaskGraph* graph = nullptr;  ///< the decision and the compute task
  const std::vector<TaskTiming>* timing = nullptr;
  const LayerRouting* routing = nullptr;  ///< an attention execution at a MoE block: its routing
};

/// The μ-queues, token pool, KV caches and load balancer of an attention–expert split.
class LayerQueueRuntime {
 public:
  struct Hooks {
    std::function<void(Request&)> finished;  ///< a request's last token is out (its KV released)
    std::function<void(const ExecutionRecord&)> executed;
    std::function<void(const TaskGraph&, const std::vector<TaskTiming>&)> sent;  ///< a message arrived
  };
  /// Busy time per GPU, split as the serving metrics split it.
  struct GpuBusy {
    Tick compute = 0;     ///< layers executing
    Tick scheduling = 0;  ///< scheduler decisions
  };

  LayerQueueRuntime(const ModelSpec& model, const Cluster& cluster, const RoutingModel& routing,
                    const LayerQueueDeployment& deployment, std::int64_t kv_block_tokens, std::uint64_t seed,
                    Simulator& sim, PlanExecutor& exec, std::vector<Request>& requests, InterTokenGaps& gaps,
                    Hooks hooks);
  ~LayerQueueRuntime();

  /// Request `index` has arrived: it waits for an attention GPU with room for its KV cache.
  void arrive(int index);
  /// Throws std::logic_error (an invariant) when KV blocks are still held.
  void check_drained() const;

  double kv_cache_peak_fraction() const;
  /// No task of a graph still in flight (so none reported later) started before this tick.
  Tick horizon() const;
  const LayerQueueDeployment& deployment() const { return deployment_; }
  const std::vector<GpuBusy>& gpu_busy() const { return busy_; }
  /// Executions and the tokens they covered (for tests and batch-size metrics).
  std::int64_t executions() const { return executions_; }
  std::int64_t executed_tokens() const { return executed_tokens_; }
  /// Selections that reached each (block, expert) queue over the run: tokens × top-k per block.
  const std::vector<std::vector<std::int64_t>>& expert_arrivals() const { return expert_arrivals_; }
  /// Tokens each block's attention executed over the run.
  const std::vector<std::int64_t>& attention_tokens() const { return attention_tokens_; }

 private:
  struct State;
  std::unique_ptr<State> s_;
  LayerQueueDeployment deployment_;
  std::vector<GpuBusy> busy_;
  std::int64_t executions_ = 0, executed_tokens_ = 0;
  std::vector<std::vector<std::int64_t>> expert_arrivals_;
  std::vector<std::int64_t> attention_tokens_;
};

}  // namespace moesim
