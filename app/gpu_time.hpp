#pragma once
// Per-GPU time breakdown (HarMoEny Fig. 4a and Fig. 9): how each GPU spent a batch, split into
// compute, copy, communication, scheduling and waiting.
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan_executor.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// Time one GPU spent in each class. Overlapping activities are counted once, by precedence
/// compute > copy > communication > scheduling (the classes of sim/chrome_trace.hpp's
/// gpu_uses: kCompute; kCopy; kSend and kReceive; kSchedule), and waiting is the rest, so the
/// five parts sum to the window's length.
struct GpuTime {
  Tick compute = 0;        ///< union of the compute stream's tasks
  Tick copy = 0;           ///< copy-engine transfers of this GPU, outside compute
  Tick communication = 0;  ///< network transfers it sends or receives, outside compute and copy
  Tick scheduling = 0;     ///< delay tasks on this GPU (CPU-side), outside all of the above
  Tick waiting = 0;        ///< none of the above

  /// Computing or copying: what gpu_idle_fraction counts as busy.
  Tick busy() const { return compute + copy; }
  Tick total() const { return compute + copy + communication + scheduling + waiting; }
  GpuTime& operator+=(const GpuTime& o);
};

/// Breakdown of every GPU over the window [start, end] of one executed plan (tasks outside the
/// window are clipped to it).
std::vector<GpuTime> gpu_time_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                        int num_gpus, Tick start, Tick end);

/// result.json's `gpu_time_breakdown`: {per_gpu_ms: [{compute, copy, communication, scheduling,
/// waiting}], mean_fraction: {same keys, each a share of `makespan` averaged over GPUs}}.
nlohmann::json gpu_time_json(const std::vector<GpuTime>& per_gpu, Tick makespan);

}  // namespace moesim
