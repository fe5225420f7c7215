#pragma once
// A plan of work for the engine: compute tasks on a GPU's stream, transfers over the network
// (optionally holding a copy engine), fixed delays, and joins, linked by dependencies.
// Policies build plans; the PlanExecutor times them. Collectives expand into transfer tasks.
// A plan may also be built while it runs (PlanExecutor::run_fed): it then drops the finished
// tasks at its front, so only a window of a long plan is ever held.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "sim/hop_latency.hpp"
#include "sim/paged_vector.hpp"
#include "sim/tick.hpp"
#include "sim/work.hpp"

namespace moesim {

using TaskId = std::uint32_t;

/// kCollective: one GPU's part of a collective priced in closed form when the plan is built
/// (hardware.all_to_all_model closed-form): it occupies the GPU's links for `delay` ticks from
/// when it is ready, and stands for the transfers the GPU sends and receives.
enum class TaskKind : std::uint8_t { kCompute, kTransfer, kDelay, kJoin, kCollective };

/// What part of the work a task belongs to, for metrics and traces: a tag the engine carries and
/// never interprets. The values an MoE model uses (attention, dispatch, experts, ...) and their
/// names are defined above the engine, in hardware/phase.hpp; Phase{} is "other".
enum class Phase : std::uint8_t {};

/// A copy engine a transfer must hold while it runs (none for NCCL-style kernels).
enum class CopyEngine : std::int8_t { kNone = -1, kHostToDevice = 0, kDeviceToHost = 1, kPeer = 2 };

/// One node of the plan.
struct Task {
  TaskKind kind = TaskKind::kJoin;
  Phase phase = Phase{};
  CopyEngine engine = CopyEngine::kNone;
  HopLatency hop = HopLatency::kPaid;  ///< kTransfer: kInLaunch when a delay before it paid the hops
  /// Which micro-batch of a two-batch-overlap step the task belongs to (0 otherwise): a compute
  /// stream's chooser may run the earlier micro-batch's work first.
  std::uint8_t micro_batch = 0;
  /// How many identical copies, run back to back, the task stands for (layer sampling: a sampled
  /// layer's tasks stand for every layer of its block): compute and delay times and a transfer's
  /// bytes are multiplied by it. 1 otherwise.
  std::uint16_t repeat = 1;
  /// kTransfer: the flow carries bytes × wire_scale at line rate (a protocol's efficiency and the
  /// link rate NCCL achieves, or a measured efficiency); `bytes` stays the data, for statistics.
  float wire_scale = 1.0f;
  std::int32_t layer = -1;  ///< model layer, -1 if none
  std::int32_t gpu = -1;    ///< compute: the GPU; transfer: GPU whose engine/stats it uses
  // kCompute: ops [ops_begin, ops_begin + ops_count) of TaskGraph::ops()
  std::uint32_t ops_begin = 0;
  std::uint32_t ops_count = 0;
  // kTransfer: endpoints of the cluster and the payload; kCollective: the bytes its GPU sends
  std::int32_t src = -1;
  std::int32_t dst = -1;
  double bytes = 0.0;
  /// kCollective: the part of `bytes` that crosses nodes
  double bytes_across_nodes = 0.0;
  // kDelay and kCollective: the duration
  Tick delay = 0;
};

/// A task's successors: up to four inline (almost every task has one or two: a transfer feeds
/// its sender's and receiver's joins), more on the heap, so a plan of millions of tasks does not
/// make millions of allocations. Once on the heap a list stays there: clear() keeps the capacity,
/// so a plan rebuilt every step in the same pages (an all-to-all's launch feeds every transfer of
/// its GPU) does not allocate its long lists again.
class SuccessorList {
 public:
  SuccessorList() = default;
  SuccessorList(const SuccessorList& o);
  SuccessorList(SuccessorList&& o) noexcept { take(o); }
  SuccessorList& operator=(const SuccessorList& o);
  SuccessorList& operator=(SuccessorList&& o) noexcept;
  ~SuccessorList() { release(); }
  void push_back(TaskId id);
  /// Empties the list, keeping its storage.
  void clear() { size_ = 0; }
  std::span<const TaskId> view() const { return {on_heap() ? ids_.heap : ids_.inline_, size_}; }

 private:
  static constexpr std::uint32_t kInline = 4;
  bool on_heap() const { return capacity_ > kInline; }
  void release() noexcept {
    if (on_heap()) delete[] ids_.heap;
  }
  /// Takes `o`'s ids (a plain copy of the storage: inline ids or the heap pointer), leaving it empty.
  void take(SuccessorList& o) noexcept {
    size_ = o.size_;
    capacity_ = o.capacity_;
    ids_ = o.ids_;
    o.size_ = 0;
    o.capacity_ = kInline;
  }
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;  ///< kInline: the inline ids; more: the heap's capacity
  union Ids {
    TaskId inline_[kInline];
    TaskId* heap;
  } ids_{};
};

/// The plan: tasks in insertion order with their dependency edges. Ids are positions in
/// insertion order and never change, even after the tasks before them are dropped.
class TaskGraph {
 public:
  using Deps = std::span<const TaskId>;
  static constexpr TaskId kNoTask = ~TaskId{0};

  /// Tasks are held in pages of 2^page_bits (PagedVector): the default suits a step or a batch;
  /// a graph of a few tasks, made by the thousand (a layer-queue execution or message), takes
  /// small pages so that its memory is its size.
  explicit TaskGraph(std::size_t page_bits = PagedVector<Task>::kPageBits)
      : tasks_(page_bits), successors_(page_bits), dep_count_(page_bits) {}

  TaskId compute(int gpu, Phase phase, int layer, std::vector<Op>&& ops, Deps deps = {});
  /// The same, copying `ops` (a step's attention ops, shared by its layers) straight into the plan.
  TaskId compute(int gpu, Phase phase, int layer, const std::vector<Op>& ops, Deps deps = {});
  TaskId transfer(int src_endpoint, int dst_endpoint, double bytes, Phase phase, int layer,
                  Deps deps = {}, int stats_gpu = -1, CopyEngine engine = CopyEngine::kNone);
  TaskId delay(Tick duration, Phase phase, int layer, Deps deps = {}, int gpu = -1);
  /// Host work on `gpu`'s host thread (a kDelay carrying one OpKind::kHost op): the executor asks
  /// its host_time hook how long it takes, as it asks compute_time for a kernel's.
  TaskId host(int gpu, Phase phase, int layer, const Op& work, Deps deps = {});
  /// Prices transfer `id` as a collective's flow: it carries its bytes × `wire_scale` at line rate,
  /// and with `hop` kInLaunch starts without its route's hop latencies (NCCL-priced collectives pay
  /// NCCL's latency, hops included, in the delay before them).
  void price_transfer(TaskId id, double wire_scale, HopLatency hop);
  TaskId join(Deps deps, Phase phase = Phase{}, int layer = -1);
  /// GPU `gpu`'s part of a collective priced when the plan is built (TaskKind::kCollective): it
  /// lasts `duration` once ready; `bytes_sent` (of which `bytes_across_nodes` leave its node) is
  /// what the GPU sends, for statistics.
  TaskId collective(int gpu, Tick duration, double bytes_sent, double bytes_across_nodes, Phase phase, int layer,
                    Deps deps = {});
  /// `task` may not start before `before` has finished.
  void depend(TaskId task, TaskId before);
  /// Renumbers every task's GPU and transfer endpoints: `gpu_of[g]` for GPU g, `endpoint_of[e]`
  /// for endpoint e (a plan made for part of a cluster, mapped onto the whole).
  void remap(const std::vector<int>& gpu_of, const std::vector<int>& endpoint_of);

  /// Tasks ever added: ids are [0, size()).
  std::size_t size() const { return tasks_.size(); }
  /// The first task still held: 0 unless drop_before() was called.
  TaskId first() const { return static_cast<TaskId>(tasks_.first()); }
  /// Tasks [first(), size()), in id order.
  PagedVector<Task>::View tasks() const { return tasks_.view(); }
  // The accessors below take held tasks only (ids from first() on). Tasks and their successor
  // lists never move while the plan grows.
  const Task& task(TaskId id) const { return tasks_[id]; }
  /// Marks tasks [first, end) as belonging to micro-batch `mb` (Task::micro_batch).
  void set_micro_batch(TaskId first, TaskId end, std::uint8_t mb);
  /// Marks tasks [first, end) as standing for `repeat` copies each (Task::repeat).
  void set_repeat(TaskId first, TaskId end, std::uint16_t repeat);
  std::span<const Op> ops_of(const Task& t) const { return {ops_.data() + (t.ops_begin - ops_base_), t.ops_count}; }
  std::span<const TaskId> successors(TaskId id) const { return successors_[id].view(); }
  std::uint32_t dependency_count(TaskId id) const { return dep_count_[id]; }

  /// Forgets every task and op, keeping the memory for the next plan built into this one.
  void clear();

  /// Forgets tasks [first(), before): a plan run while it is built drops what has finished. A
  /// dropped task may no longer be read or depended on.
  void drop_before(TaskId before);
  /// Starts watching new dependencies: earliest_dependency() is then the earliest task that any
  /// dependency added since points to (kNoTask while none), so an executor can check that a part
  /// added to a running plan depends only on tasks that cannot have finished.
  void watch_dependencies() { earliest_dependency_ = kNoTask; }
  TaskId earliest_dependency() const { return earliest_dependency_; }

 private:
  TaskId add(Task t, Deps deps);
  /// A compute task whose `ops` ops are appended next.
  Task compute_task(int gpu, Phase phase, int layer, std::size_t ops) const;
  PagedVector<Task> tasks_;
  PagedVector<SuccessorList> successors_;
  PagedVector<std::uint32_t> dep_count_;
  std::vector<Op> ops_;  ///< ops_[i] is op number ops_base_ + i (Task::ops_begin counts from 0)
  std::uint32_t ops_base_ = 0;
  TaskId earliest_dependency_ = kNoTask;
};

}  // namespace moesim
