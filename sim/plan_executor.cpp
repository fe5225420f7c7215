#include "sim/plan_executor.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace moesim {

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

GraphId PlanExecutor::submit(std::shared_ptr<const TaskGraph> plan, GraphDone on_done) {
  if (!plan) throw std::invalid_argument("submit: null plan");
  const std::uint32_t slot = start_graph(std::move(plan), std::move(on_done), /*defer_sync_completion=*/true);
  return graphs_[slot].id;
}

GraphId PlanExecutor::submit(TaskGraph&& plan, GraphDone on_done) {
  return submit(std::make_shared<const TaskGraph>(std::move(plan)), std::move(on_done));
}

std::uint32_t PlanExecutor::start_graph(std::shared_ptr<const TaskGraph> plan, GraphDone on_done,
                                        bool defer_sync_completion) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(graphs_.size());
    graphs_.emplace_back();
  }
  // `plan` (the parameter) keeps the graph alive for this whole call even if it completes inside.
  const TaskGraph& p = *plan;
  {
    Graph& g = graphs_[slot];
    g.plan = plan;
    g.timing.assign(p.size(), TaskTiming{});
    g.pending_deps.resize(p.size());
    for (TaskId i = 0; i < p.size(); ++i) g.pending_deps[i] = p.dependency_count(i);
    g.done = 0;
    g.id = next_id_++;
    g.on_done = std::move(on_done);
    g.starting = defer_sync_completion;
    g.finished_starting = false;
  }
  // Roots by their static dependency count: a join root finishing at once lowers later tasks'
  // pending counts, which must not make them look like roots too.
  for (TaskId i = 0; i < p.size(); ++i)
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

void PlanExecutor::complete(std::uint32_t slot) {
  Graph& g = graphs_[slot];
  if (g.starting) {
    g.finished_starting = true;
    return;
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
  free_slots_.push_back(slot);
}

PlanExecutor::Stream& PlanExecutor::stream_of(const Task& t) {
  if (t.kind == TaskKind::kCompute) return compute_[t.gpu];
  return engines_[t.gpu][static_cast<int>(t.engine)];
}

void PlanExecutor::on_ready(std::uint32_t slot, TaskId id) {
  Graph& g = graphs_[slot];
  const Task& t = g.plan->task(id);
  const Tick now = sim_.now();
  g.timing[id].ready = now;
  switch (t.kind) {
    case TaskKind::kJoin:
      g.timing[id].start = now;
      finish(slot, id);
      break;
    case TaskKind::kDelay:
      g.timing[id].start = now;
      sim_.after(t.delay, [this, slot, id] { finish(slot, id); }, EventPriority::kCompletion);
      break;
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
  g.timing[e.id].start = sim_.now();
  // Captures stay at 16 bytes (this, slot, id) so std::function keeps them inline; the stream is
  // found again from the task, which outlives the event because its graph is still in flight.
  auto done = [this, slot = e.slot, id = e.id] {
    Stream& st = stream_of(graphs_[slot].plan->task(id));
    st.busy = false;
    finish(slot, id);
    kick_stream(st);
  };
  if (t.kind == TaskKind::kCompute) {
    sim_.after(hooks_.compute_time(t, g.plan->ops_of(t)), done, EventPriority::kCompletion);
  } else {
    net_.start_flow(hooks_.route(t.src, t.dst), t.bytes, done);
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
      scratch_.push_back(ReadyTask{g.id, w.id, &g.plan->task(w.id), g.timing[w.id].ready});
    }
    pick = chooser_(s.gpu, std::span<const ReadyTask>(scratch_));
    if (pick >= waiting) {
      throw std::logic_error("compute chooser for GPU " + std::to_string(s.gpu) + " picked index " +
                             std::to_string(pick) + " of " + std::to_string(waiting) + " waiting tasks");
    }
  }
  const auto at = s.ready.begin() + static_cast<std::ptrdiff_t>(s.head + pick);
  const Entry e = *at;
  if (pick == 0) {
    ++s.head;
  } else {
    s.ready.erase(at);  // the others keep their order
  }
  if (s.head == s.ready.size()) {
    s.ready.clear();
    s.head = 0;
  } else if (s.head >= kCompactAfter && 2 * s.head >= s.ready.size()) {
    s.ready.erase(s.ready.begin(), s.ready.begin() + static_cast<std::ptrdiff_t>(s.head));
    s.head = 0;
  }
  return e;
}

void PlanExecutor::start_transfer(std::uint32_t slot, TaskId id) {
  Graph& g = graphs_[slot];
  const Task& t = g.plan->task(id);
  g.timing[id].start = sim_.now();
  net_.start_flow(hooks_.route(t.src, t.dst), t.bytes, [this, slot, id] { finish(slot, id); });
}

void PlanExecutor::finish(std::uint32_t slot, TaskId id) {
  Graph& g = graphs_[slot];
  g.timing[id].end = sim_.now();
  // The last task of a graph has no successors (they would finish after it).
  if (++g.done == g.timing.size()) {
    complete(slot);
    return;
  }
  // Iterate by index over a saved pointer and count, re-finding the graph each time: on_ready may
  // complete the graph (joins finish at once) and its callback may submit (growing graphs_).
  // That can only happen on the last successor (every later one still waits on this task), after
  // which nothing here is read again.
  const std::vector<TaskId>& succ = g.plan->successors(id);
  const TaskId* next = succ.data();
  const std::size_t n = succ.size();
  for (std::size_t k = 0; k < n; ++k)
    if (--graphs_[slot].pending_deps[next[k]] == 0) on_ready(slot, next[k]);
}

}  // namespace moesim
