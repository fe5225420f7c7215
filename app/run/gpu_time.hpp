#pragma once
// The per-GPU time breakdown (HarMoEny Fig. 4a and Fig. 9): how long each GPU spent computing,
// copying, communicating, scheduling and waiting over a window. Computed by a sweep that takes
// tasks as they finish, so a batch that runs while it is planned never needs its whole plan.
#include <array>
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

/// The breakdown of every GPU over a window, from tasks handed over in any order as they finish.
/// Only whether a class is active matters at each instant, so overlapping intervals of one class
/// on one GPU are merged as they arrive (an all-to-all's flows to and from a GPU overlap) and
/// only their union reaches the sweep. Each GPU's edges wait until no task still to come can
/// start before them (the horizon), then are swept in time order: each stretch between edges goes
/// to the highest-precedence class active in it. Ticks are summed exactly, so the result does not
/// depend on how the tasks were split into hand-overs.
class GpuTimeSweep {
 public:
  /// Tasks are clipped to [start, end].
  GpuTimeSweep(int num_gpus, Tick start, Tick end = kTickMax);
  /// Counts a finished task (joins and GPU-less tasks count nowhere).
  void add(const Task& t, const TaskTiming& timing);
  /// Sweeps every edge before `horizon`: no task added later starts before it.
  void advance(Tick horizon);
  /// Sweeps the rest; waiting is what the window [start, end] leaves (`end` may close a window
  /// opened without one).
  std::vector<GpuTime> finish(Tick end);
  /// finish() into `out` (its contents replaced, its memory kept).
  void finish_into(Tick end, std::vector<GpuTime>& out);
  /// Starts over at `start` (no end), keeping the lanes' memory.
  void reset(Tick start);

 private:
  struct Edge {
    Tick at;
    int cls;
    int delta;  ///< +1 an interval of class `cls` begins, -1 one ends
  };
  /// The union of a run of overlapping intervals of one class, not yet turned into edges.
  struct Open {
    Tick begin = 0, end = 0;
    bool held = false;
  };
  static constexpr int kClasses = 4;
  /// One GPU's sweep: intervals being merged, edges not yet swept, and where the sweep stopped.
  struct Lane {
    std::array<Open, kClasses> open;
    std::vector<Edge> pending;
    std::size_t sorted = 0;  ///< pending's first `sorted` edges are in order (the last sweep's rest)
    std::array<int, kClasses> active{};
    Tick prev = 0;
    GpuTime time;
    bool dirty = false;  ///< has open intervals or pending edges
  };
  static void flush(Lane& lane);
  void sweep(Lane& lane, Tick horizon);

  Tick start_, end_;
  std::vector<Lane> lanes_;
  std::vector<int> dirty_;  ///< the dirty lanes
  std::vector<Edge> merged_;  ///< sweep's scratch
};

/// Breakdown of every GPU over the window [start, end] of one executed plan (tasks outside the
/// window are clipped to it).
std::vector<GpuTime> gpu_time_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                        int num_gpus, Tick start, Tick end);

/// result.json's `gpu_time_breakdown`: {per_gpu_ms: [{compute, copy, communication, scheduling,
/// waiting}], mean_fraction: {same keys, each a share of `makespan` averaged over GPUs}}.
nlohmann::json gpu_time_json(const std::vector<GpuTime>& per_gpu, Tick makespan);

}  // namespace moesim
