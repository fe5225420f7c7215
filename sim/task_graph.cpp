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
  const auto id = static_cast<TaskId>(size());
  tasks_.push_back(t);
  successors_.emplace_back();
  dep_count_.push_back(0);
  for (TaskId d : deps) depend(id, d);
  return id;
}

void TaskGraph::depend(TaskId task, TaskId before) {
  // Dependencies point backwards in insertion order, so every plan is acyclic by construction.
  if (before >= task) throw std::logic_error("task dependency must point to an earlier task");
  if (before < first_) throw std::logic_error("task dependency points to a dropped task");
  successors_[before - base_].push_back(task);
  ++dep_count_[task - base_];
  if (before < earliest_dependency_) earliest_dependency_ = before;
}

void TaskGraph::drop_before(TaskId before) {
  if (before > size()) throw std::logic_error("TaskGraph::drop_before: beyond the last task");
  if (before <= first_) return;
  first_ = before;
  // Compacted only once the dropped front outweighs what is held, so each task is moved at most
  // a constant number of times however the plan is dropped.
  const std::size_t dropped = first_ - base_;
  if (2 * dropped < tasks_.size()) return;
  // Ops are stored in task order: the held tasks' ops start at the first held compute task's.
  std::uint32_t first_op = ops_base_ + static_cast<std::uint32_t>(ops_.size());
  for (std::size_t i = dropped; i < tasks_.size(); ++i)
    if (tasks_[i].ops_count > 0) {
      first_op = tasks_[i].ops_begin;
      break;
    }
  ops_.erase(ops_.begin(), ops_.begin() + (first_op - ops_base_));
  ops_base_ = first_op;
  const auto cut = static_cast<std::ptrdiff_t>(dropped);
  tasks_.erase(tasks_.begin(), tasks_.begin() + cut);
  successors_.erase(successors_.begin(), successors_.begin() + cut);
  dep_count_.erase(dep_count_.begin(), dep_count_.begin() + cut);
  base_ = first_;
}

TaskId TaskGraph::compute(int gpu, Phase phase, int layer, std::vector<Op> ops, Deps deps) {
  Task t;
  t.kind = TaskKind::kCompute;
  t.phase = phase;
  t.layer = layer;
  t.gpu = gpu;
  t.ops_begin = ops_base_ + static_cast<std::uint32_t>(ops_.size());
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
