#pragma once
// What one executed prefill batch showed, gathered from its tasks as they finish. A large batch
// runs while it is planned (PlanExecutor::run_fed) and its plan is never whole, so everything the
// metrics need is accumulated here part by part: the batch's end, each layer's end, all-to-all
// window and activity breakdown, the per-GPU time breakdown, and the bytes moved.
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run/gpu_time.hpp"
#include "app/run/layer_breakdown.hpp"
#include "hardware/cluster.hpp"
#include "serving/batch_feed.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

/// Bytes moved between endpoints, by class (result.json's `bytes`).
struct TrafficBytes {
  double intra_gpu = 0.0;  ///< all-to-all rows that stayed on their token's GPU (no transfer)
  double intra_node = 0.0;
  double inter_node = 0.0;
  double host_to_device = 0.0;  ///< either direction between a GPU and host memory
  /// Counts a transfer task (others are ignored): host traffic, else by the endpoints' nodes.
  void add(const Task& t, const Cluster& cluster);
  nlohmann::json to_json() const;
};

/// Observes one batch task by task. Tasks must be handed over in id order, each exactly once;
/// results equal those of the whole plan's timings however the hand-overs split it.
class BatchRecorder final : public BatchObserver {
 public:
  /// A batch that began at `start`. Transfers are counted into `bytes` as they are handed over
  /// (a run's total, so that it sums in the same order whatever the batches' split).
  /// `layer_breakdown` false skips each layer's activity breakdown (layer_parts() stays empty):
  /// a serving step reports none, and its sweep is a sort per layer per step.
  BatchRecorder(const Cluster& cluster, Tick start, TrafficBytes& bytes, bool layer_breakdown = true);
  /// Starts over for a batch that began at `start`, keeping the memory already taken (a serving
  /// run records every step with one recorder).
  void reset(Tick start);

  /// Tasks [first, first + timing.size()) of the batch's plan, finished. No task handed over
  /// later starts before `horizon`.
  void add(const TaskGraph& plan, TaskId first, std::span<const TaskTiming> timing, Tick horizon) override;
  /// Layers before `layer` are complete: none of their tasks is handed over any more (a later one
  /// is a std::logic_error). Their latency, all-to-all time and breakdown are taken now.
  void close_layers(int layer) override;
  /// Closes every layer and the per-GPU breakdown; call once, after the last hand-over.
  void finish();

  // Results (after finish).
  Tick start() const { return start_; }
  Tick end() const { return end_; }  ///< the batch's last task's end
  /// The end of its last layer (TTFT): the latest layer end, or end() without layered tasks.
  Tick ttft_end() const { return has_layers_ ? max_layer_end_ : end_; }
  /// Per MoE layer (layers with a router task), in layer order.
  const std::vector<double>& layer_ms() const { return layer_ms_; }
  const std::vector<double>& alltoall_ms() const { return alltoall_ms_; }
  const std::vector<LayerBreakdown>& layer_parts() const { return layer_parts_; }
  const std::vector<GpuTime>& gpu_time() const { return gpu_time_; }

 private:
  /// A layer whose tasks are still being handed over.
  struct OpenLayer {
    Tick end = 0;
    bool moe = false;
    int repeat = 1;  ///< Task::repeat of its router tasks (layer sampling)
    Tick a2a_begin[2] = {kTickMax, kTickMax};  ///< dispatch, combine
    Tick a2a_end[2] = {0, 0};
    LayerSweep sweep;
  };
  OpenLayer& layer(int l);

  const Cluster& cluster_;
  TrafficBytes& bytes_;
  Tick start_;
  Tick end_;
  Tick prev_;  ///< where the next layer's window begins: the latest end of the layers closed
  Tick max_layer_end_;
  bool has_layers_ = false;
  bool layer_breakdown_ = true;
  int closed_ = 0;                ///< layers before this are closed
  std::deque<OpenLayer> open_;    ///< open_[i] is layer closed_ + i
  int cached_layer_ = -1;          ///< the layer add() found last (-1: none), and its entry
  OpenLayer* cached_open_ = nullptr;
  GpuTimeSweep gpu_sweep_;
  std::vector<double> layer_ms_, alltoall_ms_;
  std::vector<LayerBreakdown> layer_parts_;
  std::vector<GpuTime> gpu_time_;
};

}  // namespace moesim
