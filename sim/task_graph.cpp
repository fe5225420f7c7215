#include "sim/task_graph.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace moesim {

SuccessorList::SuccessorList(const SuccessorList& o) : size_(o.size_), capacity_(o.capacity_), ids_(o.ids_) {
  if (o.on_heap()) {
    ids_.heap = new TaskId[capacity_];
    std::copy(o.ids_.heap, o.ids_.heap + size_, ids_.heap);
  }
}

SuccessorList& SuccessorList::operator=(const SuccessorList& o) {
  if (this != &o) *this = SuccessorList(o);
  return *this;
}

SuccessorList& SuccessorList::operator=(SuccessorList&& o) noexcept {
  if (this != &o) {
    release();
    take(o);
  }
  return *this;
}

void SuccessorList::push_back(TaskId id) {
  if (size_ == capacity_) {
    const std::uint32_t grown = 2 * capacity_;
    auto* moved = new TaskId[grown];
    const std::span<const TaskId> old = view();
    std::copy(old.begin(), old.end(), moved);
    release();
    ids_.heap = moved;
    capacity_ = grown;
  }
  if (on_heap())
    ids_.heap[size_++] = id;
  else
    ids_.inline_[size_++] = id;
}

TaskId TaskGraph::add(Task t, Deps deps) {
  const auto id = static_cast<TaskId>(size());
  tasks_.push_back(t);
  successors_.grow_back().clear();  // a reused page's list keeps its storage
  dep_count_.push_back(0);
  for (TaskId d : deps) depend(id, d);
  return id;
}

void TaskGraph::depend(TaskId task, TaskId before) {
  // Dependencies point backwards in insertion order, so every plan is acyclic by construction.
  if (before >= task) throw std::logic_error("task dependency must point to an earlier task");
  if (before < first()) throw std::logic_error("task dependency points to a dropped task");
  successors_[before].push_back(task);
  ++dep_count_[task];
  if (before < earliest_dependency_) earliest_dependency_ = before;
}

void TaskGraph::clear() {
  tasks_.clear();
  successors_.clear();
  dep_count_.clear();
  ops_.clear();
  ops_base_ = 0;
  earliest_dependency_ = kNoTask;
}

void TaskGraph::drop_before(TaskId before) {
  if (before > size()) throw std::logic_error("TaskGraph::drop_before: beyond the last task");
  if (before <= first()) return;
  tasks_.drop_before(before);
  successors_.drop_before(before);
  dep_count_.drop_before(before);
  // Ops are stored in task order: the held tasks' ops start at the first held compute task's.
  // Compacted only once the dropped ops outweigh the held ones, so each op moves O(1) times.
  std::uint32_t first_op = ops_base_ + static_cast<std::uint32_t>(ops_.size());
  for (const Task& t : tasks())
    if (t.ops_count > 0) {
      first_op = t.ops_begin;
      break;
    }
  const std::size_t dropped = first_op - ops_base_;
  if (2 * dropped < ops_.size()) return;
  ops_.erase(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(dropped));
  ops_base_ = first_op;
}

Task TaskGraph::compute_task(int gpu, Phase phase, int layer, std::size_t ops) const {
  Task t;
  t.kind = TaskKind::kCompute;
  t.phase = phase;
  t.layer = layer;
  t.gpu = gpu;
  t.ops_begin = ops_base_ + static_cast<std::uint32_t>(ops_.size());
  t.ops_count = static_cast<std::uint32_t>(ops);
  return t;
}

TaskId TaskGraph::compute(int gpu, Phase phase, int layer, std::vector<Op>&& ops, Deps deps) {
  const Task t = compute_task(gpu, phase, layer, ops.size());
  for (auto& op : ops) ops_.push_back(std::move(op));
  return add(t, deps);
}

TaskId TaskGraph::compute(int gpu, Phase phase, int layer, const std::vector<Op>& ops, Deps deps) {
  const Task t = compute_task(gpu, phase, layer, ops.size());
  ops_.insert(ops_.end(), ops.begin(), ops.end());
  return add(t, deps);
}

void TaskGraph::price_transfer(TaskId id, double wire_scale, HopLatency hop) {
  Task& t = tasks_[id];
  if (t.kind != TaskKind::kTransfer) throw std::logic_error("price_transfer: task is not a transfer");
  if (!(wire_scale > 0.0) || !std::isfinite(wire_scale))
    throw std::logic_error("price_transfer: wire scale must be positive and finite");
  t.wire_scale = static_cast<float>(wire_scale);
  t.hop = hop;
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

TaskId TaskGraph::host(int gpu, Phase phase, int layer, const Op& work, Deps deps) {
  if (work.kind != OpKind::kHost) throw std::logic_error("TaskGraph::host: the work is not host work");
  Task t = compute_task(gpu, phase, layer, 1);  // a compute task's op bookkeeping, as a delay
  t.kind = TaskKind::kDelay;
  ops_.push_back(work);
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

TaskId TaskGraph::collective(int gpu, Tick duration, double bytes_sent, double bytes_across_nodes, Phase phase,
                             int layer, Deps deps) {
  if (duration < 0 || !(bytes_sent >= 0.0) || !(bytes_across_nodes >= 0.0) || bytes_across_nodes > bytes_sent)
    throw std::logic_error("TaskGraph::collective: a negative duration, or bytes across nodes not within the bytes sent");
  // A delay on its GPU that carries the bytes its GPU sends.
  const TaskId id = delay(duration, phase, layer, deps, gpu);
  Task& t = tasks_[id];
  t.kind = TaskKind::kCollective;
  t.bytes = bytes_sent;
  t.bytes_across_nodes = bytes_across_nodes;
  return id;
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
  for (std::size_t id = first(); id < size(); ++id) {
    Task& t = tasks_[id];
    t.gpu = map(gpu_of, t.gpu);
    t.src = map(endpoint_of, t.src);
    t.dst = map(endpoint_of, t.dst);
  }
}

void TaskGraph::set_repeat(TaskId first, TaskId end, std::uint16_t repeat) {
  if (repeat < 1) throw std::logic_error("TaskGraph::set_repeat: a task stands for at least one copy");
  for (TaskId id = first; id < end && id < static_cast<TaskId>(tasks_.size()); ++id) tasks_[id].repeat = repeat;
}

void TaskGraph::set_micro_batch(TaskId first, TaskId end, std::uint8_t mb) {
  for (TaskId id = first; id < end && id < static_cast<TaskId>(tasks_.size()); ++id) tasks_[id].micro_batch = mb;
}

}  // namespace moesim
