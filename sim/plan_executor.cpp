#include "sim/plan_executor.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace moesim {
namespace {

// A transfer standing for `repeat` layers (layer sampling) moves repeat × its bytes; when it
// pays its route's hop latency itself (HopLatency::kPaid: calibrated and line-rate collectives),
// each layer it stands for waits for that latency too. The flow pays one; this is the rest.
Tick repeated_hop_latency(const NetworkBackend& net, const std::vector<LinkId>& path, const Task& t) {
  if (t.repeat <= 1 || t.hop != HopLatency::kPaid) return 0;
  Tick latency = 0;
  for (LinkId l : path) latency = checked_add(latency, net.link(l).latency);
  return latency;
}

}  // namespace

Tick PlanExecutor::repeated(Tick t, std::uint16_t repeat) {
  if (repeat == 1) return t;
  if (t > kTickLimit / repeat) throw TimeRangeError("a repeated task's duration passed the simulated time range (~53 days)");
  return t * repeat;
}

namespace {
// A queue drained this far from its front is compacted, so a stream that never runs dry (a
// serving loop) does not grow without bound; the threshold keeps the copy amortised O(1).
constexpr std::size_t kCompactAfter = 64;
}  // namespace

PlanExecutor::PlanExecutor(Simulator& sim, NetworkBackend& net, int num_gpus, Hooks hooks)
    : sim_(sim), net_(net), hooks_(std::move(hooks)), compute_(num_gpus), engines_(num_gpus) {
  for (int g = 0; g < num_gpus; ++g) compute_[g].gpu = g;
}

std::vector<TaskTiming> PlanExecutor::run(const TaskGraph& plan) {
  std::vector<TaskTiming> out;
  bool finished = false;
  // Non-owning: the caller's plan outlives this call. Completion is delivered synchronously (no
  // extra event), so run() schedules exactly the events it always did and its timings and event
  // counts stay identical.
  const std::uint32_t slot = start_graph(
      std::shared_ptr<const TaskGraph>(std::shared_ptr<const TaskGraph>(), &plan),
      [&out, &finished](GraphId, std::vector<TaskTiming>&& t) {
        out = std::move(t);
        finished = true;
      },
      /*defer_sync_completion=*/false);
  sim_.run();
  if (!finished) {
    const std::size_t missing = plan.size() - graphs_[slot].done;
    release(slot);
    throw std::logic_error("plan stalled: " + std::to_string(missing) + " tasks never ran");
  }
  return out;
}

void PlanExecutor::run_fed(TaskGraph& plan, PlanFeed& feed) {
  if (plan.size() != 0) throw std::invalid_argument("run_fed: the plan must start empty");
  bool finished = false;
  const std::uint32_t slot = start_graph(
      std::shared_ptr<const TaskGraph>(std::shared_ptr<const TaskGraph>(), &plan),
      [&finished](GraphId, std::vector<TaskTiming>&&) { finished = true; }, /*defer_sync_completion=*/false, &feed,
      &plan);
  sim_.run();
  if (!finished) {
    const std::size_t missing = plan.size() - graphs_[slot].done;
    release(slot);
    throw std::logic_error("plan stalled: " + std::to_string(missing) + " tasks never ran");
  }
}

GraphId PlanExecutor::submit(std::shared_ptr<const TaskGraph> plan, GraphDone on_done) {
  if (!plan) throw std::invalid_argument("submit: null plan");
  const std::uint32_t slot = start_graph(std::move(plan), std::move(on_done), /*defer_sync_completion=*/true);
  return graphs_[slot].id;
}

GraphId PlanExecutor::submit(TaskGraph&& plan, GraphDone on_done) {
  return submit(std::make_shared<const TaskGraph>(std::move(plan)), std::move(on_done));
}

std::uint32_t PlanExecutor::take_slot(std::shared_ptr<const TaskGraph> plan, GraphDone on_done) {
  if (alone_in_flight_) throw std::logic_error("a graph was submitted beside one submitted alone");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(graphs_.size());
    graphs_.emplace_back();
  }
  const TaskGraph& p = *plan;
  Graph& g = graphs_[slot];
  g.plan = std::move(plan);
  if (g.timing.capacity() < p.size() && spare_timing_.capacity() >= p.size()) g.timing.swap(spare_timing_);
  g.timing.assign(p.size(), TaskTiming{});
  g.pending_deps.resize(p.size());
  for (TaskId i = 0; i < p.size(); ++i) g.pending_deps[i] = p.dependency_count(i);
  g.done = 0;
  g.id = next_id_++;
  g.on_done = std::move(on_done);
  return slot;
}

std::uint32_t PlanExecutor::start_graph(std::shared_ptr<const TaskGraph> plan, GraphDone on_done,
                                        bool defer_sync_completion, PlanFeed* feed, TaskGraph* growing) {
  // `plan` (the parameter) keeps the graph alive for this whole call even if it completes inside.
  const std::uint32_t slot = take_slot(plan, std::move(on_done));
  const TaskGraph& p = *plan;
  {
    Graph& g = graphs_[slot];
    g.starting = defer_sync_completion;
    g.finished_starting = false;
    if (feed) {
      g.feed = feed;
      g.growing = growing;
      g.open = true;
      grow(slot);
    }
  }
  // Roots by their static dependency count: a join root finishing at once lowers later tasks'
  // pending counts, which must not make them look like roots too. A fed plan's roots are all in
  // its first part, which is all there is yet (a root may ask for the next part).
  const auto roots_end = static_cast<TaskId>(p.size());
  for (TaskId i = 0; i < roots_end; ++i)
    if (p.dependency_count(i) == 0) on_ready(slot, i);
  if (p.size() == 0) complete(slot);
  if (defer_sync_completion) {
    Graph& g = graphs_[slot];
    g.starting = false;
    // The caller does not hold the id yet: hand the result over at this tick, from an event.
    if (g.finished_starting) sim_.after(0, [this, slot] { deliver(slot); }, EventPriority::kCompletion);
  }
  return slot;
}

// Adds the feed's next part. Called before the first task of the newest part starts anything, so
// the new part's dependencies (checked to lie in that part or its own) have not finished and its
// tasks' pending counts are their static dependency counts, as in the whole plan.
void PlanExecutor::grow(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  TaskGraph& plan = *g.growing;
  const auto begin = static_cast<TaskId>(plan.size());
  plan.watch_dependencies();
  g.open = g.feed->extend(plan);
  const auto end = static_cast<TaskId>(plan.size());
  if (end == begin) {
    if (g.open) throw std::logic_error("plan feed: a part without tasks");
    return;
  }
  if (plan.earliest_dependency() < g.frontier)
    throw std::logic_error("plan feed: task " + std::to_string(plan.earliest_dependency()) +
                           " is depended on after its part's successor started");
  g.timing.resize(end - g.base, TaskTiming{});
  g.pending_deps.resize(end - g.base);
  for (TaskId i = begin; i < end; ++i) {
    g.pending_deps[i - g.base] = plan.dependency_count(i);
    if (begin > 0 && g.pending_deps[i - g.base] == 0)
      throw std::logic_error("plan feed: task " + std::to_string(i) + " has no dependency but is not in the first part");
  }
  g.parts.push_back(begin);
  g.frontier = begin;
}

// Retires a fed graph's finished parts. Called where an event's work is done (never while a task's
// successors are being walked), since retiring drops tasks from the plan.
void PlanExecutor::settle(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  if (!g.feed) return;
  const auto size = static_cast<TaskId>(g.growing->size());
  while (g.first_unfinished < size && g.timing[g.first_unfinished - g.base].end >= 0) ++g.first_unfinished;
  while (g.parts_head + 1 < g.parts.size() && g.parts[g.parts_head + 1] <= g.first_unfinished) retire_part(slot);
}

void PlanExecutor::retire_part(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  TaskGraph& plan = *g.growing;
  const TaskId first = g.parts[g.parts_head];
  const bool last = g.parts_head + 1 == g.parts.size();
  const auto end = last ? static_cast<TaskId>(plan.size()) : g.parts[g.parts_head + 1];
  // Tasks not yet retired start from now on, or already started: the earliest start among them.
  Tick horizon = last && !g.open ? kTickMax : sim_.now();
  for (TaskId i = end; i < plan.size(); ++i) {
    const Tick started = g.timing[i - g.base].start;
    if (started >= 0) horizon = std::min(horizon, started);
  }
  g.feed->retire(plan, first, std::span<const TaskTiming>(g.timing).subspan(first - g.base, end - first), horizon);
  plan.drop_before(end);
  ++g.parts_head;
  // Compacted once the retired front outweighs the rest, as the plan is.
  const std::size_t retired = end - g.base;
  if (2 * retired >= g.timing.size()) {
    g.timing.erase(g.timing.begin(), g.timing.begin() + static_cast<std::ptrdiff_t>(retired));
    g.pending_deps.erase(g.pending_deps.begin(), g.pending_deps.begin() + static_cast<std::ptrdiff_t>(retired));
    g.parts.erase(g.parts.begin(), g.parts.begin() + static_cast<std::ptrdiff_t>(g.parts_head));
    g.parts_head = 0;
    g.base = end;
  }
}

void PlanExecutor::complete(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  if (g.starting) {
    g.finished_starting = true;
    return;
  }
  // Every task has finished: a fed graph's remaining parts retire now. Whoever called finish() on
  // the way here reads none of the plan again (see finish).
  if (g.feed) {
    while (g.parts_head < g.parts.size()) retire_part(slot);
  }
  deliver(slot);
}

void PlanExecutor::deliver(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  GraphDone cb = std::move(g.on_done);
  std::vector<TaskTiming> timing = std::move(g.timing);
  const GraphId id = g.id;
  // Freed before the callback so that work it submits can reuse the slot.
  release(slot);
  if (cb) cb(id, std::move(timing));
}

void PlanExecutor::release(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  g.plan.reset();
  g.timing.clear();
  g.pending_deps.clear();  // keeps its capacity for the next graph
  g.on_done = nullptr;
  g.growing = nullptr;
  g.feed = nullptr;
  g.open = false;
  g.frontier = 0;
  g.parts.clear();
  g.parts_head = 0;
  g.base = 0;
  g.first_unfinished = 0;
  free_slots_.push_back(slot);
}

PlanExecutor::Stream& PlanExecutor::stream_of(const Task& t) {
  if (t.kind == TaskKind::kCompute) return compute_[t.gpu];
  return engines_[t.gpu][static_cast<int>(t.engine)];
}

void PlanExecutor::on_ready(std::uint32_t slot, TaskId id) {
  // The newest part of a fed plan is starting: the next one is added first (before this task can
  // finish, and before references into the plan are taken).
  if (graphs_[slot].open && id >= graphs_[slot].frontier) grow(slot);
  Graph& g = graphs_[slot];
  const Task& t = g.plan->task(id);
  const Tick now = sim_.now();
  TaskTiming& tm = g.timing[id - g.base];
  tm.ready = now;
  switch (t.kind) {
    case TaskKind::kJoin:
      tm.start = now;
      finish(slot, id);
      break;
    case TaskKind::kDelay:
    case TaskKind::kCollective: {
      // A collective priced when the plan was built runs like a delay: its links are not shared
      // with the network's other traffic (hardware.all_to_all_model closed-form).
      tm.start = now;
      // Host work is priced by the hook, as a kernel is; a plain delay carries its duration.
      if (t.ops_count > 0 && !hooks_.host_time) throw std::logic_error("a host task, and no host_time hook to price it");
      const Tick d = t.ops_count > 0 ? hooks_.host_time(t, g.plan->ops_of(t)) : t.delay;
      sim_.after(repeated(d, t.repeat), [this, slot, id] {
        finish(slot, id);
        settle(slot);
      }, EventPriority::kCompletion);
      break;
    }
    case TaskKind::kCompute:
    case TaskKind::kTransfer: {
      if (t.kind == TaskKind::kTransfer && t.engine == CopyEngine::kNone) {
        start_transfer(slot, id);
        break;
      }
      if (t.gpu < 0 || static_cast<std::size_t>(t.gpu) >= compute_.size()) {
        throw std::logic_error(std::string(t.kind == TaskKind::kCompute ? "compute" : "copy") +
                               " task on unknown GPU " + std::to_string(t.gpu));
      }
      Stream& s = stream_of(t);
      s.ready.push_back(Entry{slot, id});
      kick_stream(s);
      break;
    }
  }
}

// A stream (compute or copy engine) runs one task at a time; which one is pop_next's choice.
void PlanExecutor::kick_stream(Stream& s) {
  if (s.busy || s.head == s.ready.size()) return;
  const Entry e = pop_next(s);
  s.busy = true;
  Graph& g = graphs_[e.slot];
  const Task& t = g.plan->task(e.id);
  g.timing[e.id - g.base].start = sim_.now();
  // Captures stay at 16 bytes (this, slot, id) so std::function keeps them inline; the stream is
  // found again from the task, which outlives the event because its graph is still in flight.
  auto done = [this, slot = e.slot, id = e.id] {
    Stream& st = stream_of(graphs_[slot].plan->task(id));
    st.busy = false;
    finish(slot, id);
    kick_stream(st);
    settle(slot);
  };
  if (t.kind == TaskKind::kCompute) {
    sim_.after(repeated(hooks_.compute_time(t, g.plan->ops_of(t)), t.repeat), done, EventPriority::kCompletion);
  } else {
    const std::vector<LinkId>& path = hooks_.route(t.src, t.dst);
    const Tick rest =
        t.repeat > 1 ? repeated(repeated_hop_latency(net_, path, t), static_cast<std::uint16_t>(t.repeat - 1)) : 0;
    if (rest > 0)
      net_.start_flow(path, t.bytes * t.wire_scale * t.repeat,
                      [this, rest, done] { sim_.after(rest, done, EventPriority::kCompletion); }, t.hop);
    else
      net_.start_flow(path, t.bytes * t.wire_scale * t.repeat, done, t.hop);
  }
}

PlanExecutor::Entry PlanExecutor::pop_next(Stream& s) {
  const std::size_t waiting = s.ready.size() - s.head;
  std::size_t pick = 0;
  // FIFO needs no view: the chooser is consulted only when it has a real choice.
  if (waiting > 1 && s.gpu >= 0 && chooser_) {
    scratch_.clear();
    for (std::size_t k = s.head; k < s.ready.size(); ++k) {
      const Entry& w = s.ready[k];
      const Graph& g = graphs_[w.slot];
      scratch_.push_back(ReadyTask{g.id, w.id, &g.plan->task(w.id), g.timing[w.id - g.base].ready});
    }
    pick = chooser_pick(s.gpu, waiting);
  }
  const Entry e = take_waiting(s.ready, s.head, pick);
  if (s.head >= kCompactAfter && 2 * s.head >= s.ready.size()) {
    s.ready.erase(s.ready.begin(), s.ready.begin() + static_cast<std::ptrdiff_t>(s.head));
    s.head = 0;
  }
  return e;
}

std::size_t PlanExecutor::chooser_pick(int gpu, std::size_t waiting) {
  const std::size_t pick = chooser_(gpu, std::span<const ReadyTask>(scratch_));
  if (pick >= waiting) {
    throw std::logic_error("compute chooser for GPU " + std::to_string(gpu) + " picked index " +
                           std::to_string(pick) + " of " + std::to_string(waiting) + " waiting tasks");
  }
  return pick;
}

void PlanExecutor::start_transfer(std::uint32_t slot, TaskId id) {
  Graph& g = graphs_[slot];
  const Task& t = g.plan->task(id);
  g.timing[id - g.base].start = sim_.now();
  const std::vector<LinkId>& path = hooks_.route(t.src, t.dst);
  const Tick rest = t.repeat > 1 ? repeated(repeated_hop_latency(net_, path, t), static_cast<std::uint16_t>(t.repeat - 1)) : 0;
  if (rest > 0) {
    net_.start_flow(path, t.bytes * t.wire_scale * t.repeat, [this, slot, id, rest] {
      sim_.after(rest, [this, slot, id] {
        finish(slot, id);
        settle(slot);
      }, EventPriority::kCompletion);
    }, t.hop);
    return;
  }
  net_.start_flow(path, t.bytes * t.wire_scale * t.repeat, [this, slot, id] {
    finish(slot, id);
    settle(slot);
  }, t.hop);
}

void PlanExecutor::finish(std::uint32_t slot, TaskId id) {
  Graph& g = graphs_[slot];
  g.timing[id - g.base].end = sim_.now();
  // The last task of a graph has no successors (they would finish after it).
  if (++g.done == g.plan->size() && !g.open) {
    complete(slot);
    return;
  }
  // Iterate by index over a saved pointer and count, re-finding the graph each time: on_ready may
  // complete the graph (joins finish at once) and its callback may submit (growing graphs_).
  // That can only happen on the last successor (every later one still waits on this task), after
  // which nothing here is read again. on_ready may also add a part to a fed plan: that moves no
  // task or successor list, and adds no successor to this task (a new part depends on none of the
  // tasks finishing now).
  const std::span<const TaskId> succ = g.plan->successors(id);
  const TaskId* next = succ.data();
  const std::size_t n = succ.size();
  for (std::size_t k = 0; k < n; ++k) {
    Graph& gr = graphs_[slot];
    if (--gr.pending_deps[next[k] - gr.base] == 0) on_ready(slot, next[k]);
  }
}

}  // namespace moesim
