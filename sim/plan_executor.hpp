#pragma once
// Executes TaskGraphs on the engine's resources: one compute stream per GPU, copy engines per GPU
// and direction, and the flow network. Several graphs may be in flight at once (a serving loop
// submits new work while earlier batches still run); they share every stream and link.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "sim/network_backend.hpp"
#include "sim/simulator.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// When a task became ready, started and ended.
struct TaskTiming {
  Tick ready = -1;
  Tick start = -1;
  Tick end = -1;
};

/// Names one submitted graph; never reused within an executor's lifetime.
using GraphId = std::uint32_t;

/// A task waiting on a GPU's compute stream.
struct ReadyTask {
  GraphId graph;
  TaskId id;
  const Task* task;
  Tick ready;
};

/// Builds a plan while the executor runs it (PlanExecutor::run_fed), a part at a time, so that a
/// long plan (a prefill batch through every layer of a large cluster) is never held whole: each
/// part is asked for just before it can be needed and dropped once it has finished.
class PlanFeed {
 public:
  virtual ~PlanFeed() = default;
  /// Appends the next part to `plan`; returns false when no part will follow. The first part is
  /// asked for before the run starts; each later one when the first task of the part before it
  /// becomes ready, when none of that part's tasks has finished yet. So that every task becomes
  /// ready exactly when it would in the whole plan, a part must add at least one task (the last
  /// part may add none), no task without dependencies after the first part, and dependencies
  /// only on tasks of the part before or of its own (std::logic_error otherwise).
  virtual bool extend(TaskGraph& plan) = 0;
  /// Tasks [first, first + timing.size()), one whole part, have finished, as has every task before
  /// them; parts are retired in order. The feed reads what it needs of them; the executor then
  /// drops them from `plan`. No task retired later started before `horizon`.
  virtual void retire(const TaskGraph& plan, TaskId first, std::span<const TaskTiming> timing, Tick horizon) = 0;
};

/// Times plans. Durations of compute come from a cost model, paths from the topology.
class PlanExecutor {
 public:
  struct Hooks {
    /// Duration of a compute task (its ops on its GPU), including launch overheads.
    std::function<Tick(const Task&, std::span<const Op>)> compute_time;
    /// Links from endpoint src to endpoint dst; the reference need only stay valid until the next call.
    std::function<const std::vector<LinkId>&(int src, int dst)> route;
    /// Duration of a host task (a delay carrying host work, TaskGraph::host); unset: a
    /// plan with host work is refused.
    std::function<Tick(const Task&, std::span<const Op>)> host_time = nullptr;
  };
  /// Receives a finished graph's id and its timings (indexed by TaskId).
  using GraphDone = std::function<void(GraphId, std::vector<TaskTiming>&&)>;
  /// Picks which waiting task a GPU's compute stream runs next: returns an index into `waiting`
  /// (ordered by when each became ready, ties by the order they were queued). Default (unset):
  /// FIFO, index 0. The chooser must not call back into the executor.
  using StreamChooser = std::function<std::size_t(int gpu, std::span<const ReadyTask> waiting)>;

  PlanExecutor(Simulator& sim, NetworkBackend& net, int num_gpus, Hooks hooks);

  /// Runs `plan` from the simulator's current time until every task is done (draining the
  /// simulator, so graphs submitted earlier finish too). Throws std::logic_error if some task
  /// never ran (a dependency that cannot be met).
  std::vector<TaskTiming> run(const TaskGraph& plan);
  /// Runs a plan that `feed` builds while it runs (see PlanFeed), from the simulator's current
  /// time until it is done (draining the simulator). `plan` must be empty; the timings go to
  /// PlanFeed::retire part by part. Events and timings are those run() would give the whole plan.
  void run_fed(TaskGraph& plan, PlanFeed& feed);

  /// Starts `plan`'s ready tasks at the simulator's current time and returns at once; the executor
  /// keeps the graph alive until every task has finished, then calls `on_done` (from inside an
  /// event, at the tick the last task ended) with the graph's timings. Several graphs may be in
  /// flight at once; they share the GPUs' compute streams, copy engines and the network.
  /// An empty graph (or one of joins only) completes at the current tick through an event, never
  /// inside submit itself, so the caller always holds the id before its callback runs.
  GraphId submit(std::shared_ptr<const TaskGraph> plan, GraphDone on_done);
  /// Convenience: the executor takes ownership of `plan`.
  GraphId submit(TaskGraph&& plan, GraphDone on_done);
  /// submit() for a graph that runs alone: no graph is in flight, and the caller submits none
  /// until `on_done` has run (a single-pool serving step; std::logic_error if one is submitted).
  /// A plan without transfers (so without the network's events) is then replayed at once, in a
  /// loop of its own: its tasks' completions run in the order the simulator would run them (they
  /// are all EventPriority::kCompletion events, ordered by tick and then by when each was
  /// scheduled, and nothing else touches the streams), the compute chooser consulted as run()
  /// would, and one simulator event at its last task's end delivers it. Timings, the delivery's
  /// place among the simulator's events and events_run() are those submit() gives (unit-tested
  /// against it); plans with transfers, or submitted beside others, go through submit().
  GraphId submit_alone(std::shared_ptr<const TaskGraph> plan, GraphDone on_done);
  /// Graphs submitted and not finished.
  std::size_t in_flight() const { return graphs_.size() - free_slots_.size(); }
  /// Hands back a graph's timings once the caller is done with them: the next graph submitted
  /// reuses their memory (a serving run's step timings would otherwise be fresh pages every step).
  void recycle_timing(std::vector<TaskTiming>&& timing) { spare_timing_ = std::move(timing); }

  /// Installs the compute streams' scheduling policy (an empty function restores FIFO).
  void set_compute_chooser(StreamChooser chooser) { chooser_ = std::move(chooser); }

 private:
  /// One graph in flight. Slots are recycled (their vectors keep their capacity) so a steady
  /// stream of submissions allocates only the timings handed to the caller.
  struct Graph {
    std::shared_ptr<const TaskGraph> plan;
    std::vector<TaskTiming> timing;           ///< indexed by TaskId - base
    std::vector<std::uint32_t> pending_deps;  ///< indexed by TaskId - base
    std::size_t done = 0;
    GraphId id = 0;
    GraphDone on_done;
    bool starting = false;           ///< roots are being started inside submit
    bool finished_starting = false;  ///< completed while `starting`: deliver through an event
    // Fed graphs only (run_fed).
    TaskGraph* growing = nullptr;  ///< the plan the feed extends (the same graph as `plan`)
    PlanFeed* feed = nullptr;
    bool open = false;             ///< the feed has more parts to add
    TaskId frontier = 0;           ///< first task of the newest part
    std::vector<TaskId> parts;     ///< first task of each part not yet retired, in order
    std::size_t parts_head = 0;    ///< parts before this index are retired
    TaskId base = 0;               ///< first task whose timing is still held
    TaskId first_unfinished = 0;   ///< every task before it has finished
  };
  /// A queued task: its graph's slot and its id (8 bytes, so queues stay compact).
  struct Entry {
    std::uint32_t slot;
    TaskId id;
  };
  /// A compute stream or copy engine: runs one task at a time.
  struct Stream {
    std::vector<Entry> ready;  ///< waiting tasks from `head` on, in the order they became ready
    std::size_t head = 0;
    bool busy = false;
    int gpu = -1;              ///< compute streams: the GPU; copy engines: -1 (never consult the chooser)
  };

  /// A free slot holding `plan` with fresh timings and pending counts.
  std::uint32_t take_slot(std::shared_ptr<const TaskGraph> plan, GraphDone on_done);
  std::uint32_t start_graph(std::shared_ptr<const TaskGraph> plan, GraphDone on_done, bool defer_sync_completion,
                            PlanFeed* feed = nullptr, TaskGraph* growing = nullptr);
  // submit_alone's replay (sim/plan_replay.cpp): the executor's event handlers over a private
  // queue of completions.
  struct ReplayEvent {
    Tick at;
    std::uint64_t seq;  ///< scheduling order: ties at a tick run in it, as in the simulator
    TaskId id;
  };
  struct ReplayStream {
    std::vector<TaskId> ready;  ///< waiting tasks from `head` on, in the order they became ready
    std::size_t head = 0;
    bool busy = false;
  };
  struct Replay;
  void replay(std::uint32_t slot);
  void replay_ready(Replay& r, TaskId id);
  void replay_finish(Replay& r, TaskId id);
  void replay_kick(Replay& r, int gpu);
  void replay_schedule(Replay& r, Tick delay, TaskId id);
  /// Min-heap order of the replay's queue: by tick, then by scheduling order.
  static bool replay_later(const ReplayEvent& a, const ReplayEvent& b);
  void grow(std::uint32_t slot);
  void settle(std::uint32_t slot);
  void retire_part(std::uint32_t slot);
  void complete(std::uint32_t slot);
  void deliver(std::uint32_t slot);
  void release(std::uint32_t slot);
  void on_ready(std::uint32_t slot, TaskId id);
  void finish(std::uint32_t slot, TaskId id);
  void kick_stream(Stream& s);
  Entry pop_next(Stream& s);
  /// A duration `repeat` times over (Task::repeat), within the simulated time range.
  static Tick repeated(Tick t, std::uint16_t repeat);
  /// The chooser's pick among the `waiting` tasks viewed in scratch_ (checked to be one of them).
  std::size_t chooser_pick(int gpu, std::size_t waiting);
  /// Takes the `pick`-th waiting entry of `ready` (waiting from `head` on); the others keep their
  /// order, and a queue left empty is cleared.
  template <class T>
  static T take_waiting(std::vector<T>& ready, std::size_t& head, std::size_t pick) {
    const auto at = ready.begin() + static_cast<std::ptrdiff_t>(head + pick);
    const T e = *at;
    if (pick == 0)
      ++head;
    else
      ready.erase(at);
    if (head == ready.size()) {
      ready.clear();
      head = 0;
    }
    return e;
  }
  void start_transfer(std::uint32_t slot, TaskId id);
  Stream& stream_of(const Task& t);

  Simulator& sim_;
  NetworkBackend& net_;
  Hooks hooks_;
  StreamChooser chooser_;
  std::vector<Graph> graphs_;  ///< slot map; a slot is free when its plan is null
  std::vector<std::uint32_t> free_slots_;
  std::vector<TaskTiming> spare_timing_;  ///< recycle_timing's vector, for the next submit
  GraphId next_id_ = 0;
  std::vector<Stream> compute_;                 ///< per GPU
  std::vector<std::array<Stream, 3>> engines_;  ///< per GPU, per CopyEngine
  std::vector<ReadyTask> scratch_;              ///< the chooser's view of a stream
  std::vector<ReplayEvent> replay_heap_;        ///< submit_alone's pending completions
  std::vector<ReplayStream> replay_streams_;    ///< submit_alone's compute streams, per GPU
  bool alone_in_flight_ = false;                ///< a graph replayed by submit_alone awaits delivery
};

}  // namespace moesim
