#pragma once
// Chrome trace-event JSON (opens in Perfetto or chrome://tracing): one process per GPU with lanes
// for its compute stream, its copy engines, the network transfers it sends and receives, and the
// CPU-side scheduling done on its behalf. Also the task → (GPU, activity) classification that
// the metrics' per-GPU time breakdown shares, so that trace lanes and breakdown agree.
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan_executor.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// What a GPU is doing while a task runs. The order is the time breakdown's precedence: when
/// activities overlap on one GPU, the earliest listed one claims the time.
enum class GpuActivity : std::uint8_t { kCompute, kCopy, kSend, kReceive, kSchedule };
inline constexpr int kGpuActivities = 5;
/// Lane name of an activity ("compute", "copy engine", "network send", ...).
const char* activity_name(GpuActivity a);

/// One GPU a task occupies, and as what.
struct GpuUse {
  int gpu = -1;
  GpuActivity activity = GpuActivity::kCompute;
};

/// The (at most two) GPUs a task occupies for its whole run.
struct GpuUses {
  std::array<GpuUse, 2> items{};
  int count = 0;
  const GpuUse* begin() const { return items.data(); }
  const GpuUse* end() const { return items.data() + count; }
};

/// Classifies a task: compute → its GPU; a transfer holding a copy engine → that engine's GPU
/// (kCopy); a network transfer (no engine) → its source GPU (kSend) and its destination GPU
/// (kReceive), where endpoints [0, num_gpus) are GPUs as Cluster::gpu_endpoint numbers them;
/// a delay with a GPU → kSchedule. Joins and GPU-less delays occupy no GPU.
GpuUses gpu_uses(const Task& t, int num_gpus);

/// Collects executed plans and writes them as one trace.
class ChromeTrace {
 public:
  /// How a task's tag is named in the trace (its slices' names and categories).
  using TagName = const char* (*)(Phase);
  ChromeTrace(int num_gpus, TagName tag_name);
  /// Adds every timed task of a batch's plan. Batches must be added in time order.
  void add_batch(const TaskGraph& plan, const std::vector<TaskTiming>& timing, int batch);
  /// Adds a slice `name` over [start, end] on lane `lane` (named `lane_name`) of a process of its
  /// own named `process`, listed after the GPUs (e.g. one lane per request of a serving run).
  /// Nothing is added when start < 0 or end < start.
  void add_span(const std::string& process, const std::string& lane_name, std::int64_t lane, const std::string& name,
                Tick start, Tick end);
  /// Writes the trace; throws std::runtime_error if the file cannot be written.
  void write(const std::string& path) const;
  const nlohmann::json& events() const { return events_; }

  /// Thread id of row `row` of a lane. Perfetto drops slices that overlap on one thread without
  /// nesting, so concurrent tasks of a lane (flows of an all-to-all) go to extra rows.
  static int thread_id(GpuActivity lane, int row) { return static_cast<int>(lane) * kRowsPerLane + row; }
  static constexpr int kRowsPerLane = 1000;

 private:
  /// The first row of (gpu, lane) free at `start`, taking it until `end`; names a new row.
  int take_row(int gpu, GpuActivity lane, Tick start, Tick end);
  void name_thread(int gpu, GpuActivity lane, int row);

  int num_gpus_;
  TagName tag_name_;
  std::vector<std::string> extra_processes_;  ///< pid num_gpus_ + i
  std::set<std::pair<int, std::int64_t>> named_lanes_;
  /// row_end_[gpu][lane][row]: when the last slice on that row ends.
  std::vector<std::array<std::vector<Tick>, kGpuActivities>> row_end_;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace moesim
