#include "sim/task_graph.hpp"

#include <cassert>
#include <stdexcept>

namespace moesim {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kAttention: return "attention";
    case Phase::kRouter: return "router";
    case Phase::kDispatch: return "dispatch";
    case Phase::kExperts: return "experts";
    case Phase::kCombine: return "combine";
    case Phase::kMerge: return "merge";
    case Phase::kDense: return "dense";
    case Phase::kSchedule: return "schedule";
    case Phase::kFetch: return "fetch";
    case Phase::kCollective: return "collective";
    case Phase::kPredict: return "predict";
    case Phase::kOther: return "other";
  }
  return "?";
}

TaskId TaskGraph::add(Task t, Deps deps) {
  const auto id = static_cast<TaskId>(tasks_.size());
  tasks_.push_back(t);
  successors_.emplace_back();
  dep_count_.push_back(0);
  for (TaskId d : deps) depend(id, d);
  return id;
}

void TaskGraph::depend(TaskId task, TaskId before) {
  // Dependencies point backwards in insertion order, so every plan is acyclic by construction.
  if (before >= task) throw std::logic_error("task dependency must point to an earlier task");
  successors_[before].push_back(task);
  ++dep_count_[task];
}

TaskId TaskGraph::compute(int gpu, Phase phase, int layer, std::vector<Op> ops, Deps deps) {
  Task t;
  t.kind = TaskKind::kCompute;
  t.phase = phase;
  t.layer = layer;
  t.gpu = gpu;
  t.ops_begin = static_cast<std::uint32_t>(ops_.size());
  t.ops_count = static_cast<std::uint32_t>(ops.size());
  for (auto& op : ops) ops_.push_back(std::move(op));
  return add(t, deps);
}

TaskId TaskGraph::transfer(int src_endpoint, int dst_endpoint, double bytes, Phase phase, int layer,
                           Deps deps, int stats_gpu, CopyEngine engine) {
  assert(bytes >= 0.0);
  Task t;
  t.kind = TaskKind::kTransfer;
  t.phase = phase;
  t.layer = layer;
  t.src = src_endpoint;
  t.dst = dst_endpoint;
  t.bytes = bytes;
  t.gpu = stats_gpu;
  t.engine = engine;
  if (engine != CopyEngine::kNone && stats_gpu < 0)
    throw std::logic_error("a transfer that holds a copy engine must name its GPU");
  return add(t, deps);
}

TaskId TaskGraph::delay(Tick duration, Phase phase, int layer, Deps deps, int gpu) {
  Task t;
  t.kind = TaskKind::kDelay;
  t.phase = phase;
  t.layer = layer;
  t.delay = duration;
  t.gpu = gpu;
  return add(t, deps);
}

TaskId TaskGraph::join(Deps deps, Phase phase, int layer) {
  Task t;
  t.kind = TaskKind::kJoin;
  t.phase = phase;
  t.layer = layer;
  return add(t, deps);
}

void TaskGraph::remap(const std::vector<int>& gpu_of, const std::vector<int>& endpoint_of) {
  const auto map = [](const std::vector<int>& m, std::int32_t v) {
    if (v < 0) return v;
    if (static_cast<std::size_t>(v) >= m.size()) throw std::logic_error("TaskGraph::remap: id out of range");
    return static_cast<std::int32_t>(m[static_cast<std::size_t>(v)]);
  };
  for (Task& t : tasks_) {
    t.gpu = map(gpu_of, t.gpu);
    t.src = map(endpoint_of, t.src);
    t.dst = map(endpoint_of, t.dst);
  }
}

}  // namespace moesim
