#pragma once
// Executes a TaskGraph on the engine's resources: one compute stream per GPU (tasks serialize in
// the order they become ready), copy engines per GPU and direction, and the flow network.
#include <array>
#include <functional>
#include <span>
#include <vector>

#include "sim/flow_network.hpp"
#include "sim/simulator.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// When a task became ready, started and ended.
struct TaskTiming {
  Tick ready = -1;
  Tick start = -1;
  Tick end = -1;
};

/// Times plans. Durations of compute come from a cost model, paths from the topology.
class PlanExecutor {
 public:
  struct Hooks {
    /// Duration of a compute task (its ops on its GPU), including launch overheads.
    std::function<Tick(const Task&, std::span<const Op>)> compute_time;
    /// Links from endpoint src to endpoint dst.
    std::function<const std::vector<LinkId>&(int src, int dst)> route;
  };

  PlanExecutor(Simulator& sim, FlowNetwork& net, int num_gpus, Hooks hooks);

  /// Runs `plan` from the simulator's current time until every task is done.
  /// Throws std::logic_error if some task never ran (a dependency that cannot be met).
  std::vector<TaskTiming> run(const TaskGraph& plan);

 private:
  struct Stream {
    std::vector<TaskId> ready;  ///< FIFO (head index below)
    std::size_t head = 0;
    bool busy = false;
  };
  void on_ready(TaskId id);
  void finish(TaskId id);
  void kick_stream(Stream& s);
  void start_transfer(TaskId id);

  Simulator& sim_;
  FlowNetwork& net_;
  Hooks hooks_;
  const TaskGraph* plan_ = nullptr;
  std::vector<TaskTiming> timing_;
  std::vector<std::uint32_t> pending_deps_;
  std::vector<Stream> compute_;                 ///< per GPU
  std::vector<std::array<Stream, 3>> engines_;  ///< per GPU, per CopyEngine
  std::size_t done_ = 0;
};

}  // namespace moesim
