// PlanExecutor::submit_alone: a graph that nothing runs beside is timed at once, by the
// executor's own event handlers (on_ready, kick_stream, finish in plan_executor.cpp, mirrored
// here step for step) over a private queue of its completions instead of the simulator's.
//
// Why the order is the simulator's: every event such a graph schedules is a task's completion at
// EventPriority::kCompletion, and the simulator runs the events of one tick by priority, then in
// the order they were scheduled. Events of other priorities (arrivals, step starts) interleave
// with them in time but touch neither the streams nor the graph; no other graph is in flight, and
// none is submitted until this one is delivered (take_slot refuses one). So a private queue keyed
// by (tick, scheduling order) pops this graph's completions in the order the simulator would, and
// every handler sees the state it would have seen. The graph is then delivered by one simulator
// event at its last completion's tick, at kCompletion like the completion that would have
// delivered it; the completions replayed here are counted as run (Simulator::count_events).
//
// Why it is faster: a serving step's ~50 completions go through a heap of a few entries with no
// type-erased callbacks, instead of the simulator's queue, which holds every future arrival.
#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>

#include "sim/plan_executor.hpp"

namespace moesim {

bool PlanExecutor::replay_later(const ReplayEvent& a, const ReplayEvent& b) {
  return a.at != b.at ? a.at > b.at : a.seq > b.seq;
}

/// The replay's clock and bookkeeping.
struct PlanExecutor::Replay {
  std::uint32_t slot;
  Tick now;
  std::uint64_t seq = 0;     ///< completions scheduled so far
  std::uint64_t events = 0;  ///< completions run so far
  bool complete = false;     ///< every task has finished
};

GraphId PlanExecutor::submit_alone(std::shared_ptr<const TaskGraph> plan, GraphDone on_done) {
  if (!plan) throw std::invalid_argument("submit_alone: null plan");
  bool transfers = false;
  for (const Task& t : plan->tasks()) {
    if (t.kind != TaskKind::kTransfer) continue;
    transfers = true;  // found at the first all-to-all, not after a walk of a 10^6-transfer plan
    break;
  }
  if (transfers || in_flight() > 0) return submit(std::move(plan), std::move(on_done));
  const std::uint32_t slot = take_slot(std::move(plan), std::move(on_done));
  replay(slot);
  return graphs_[slot].id;
}

void PlanExecutor::replay(std::uint32_t slot) {
  const TaskGraph& p = *graphs_[slot].plan;
  // Fresh streams and queue (a replay that threw part-way leaves them as they were).
  replay_streams_.resize(compute_.size());
  for (ReplayStream& s : replay_streams_) {
    s.ready.clear();
    s.head = 0;
    s.busy = false;
  }
  replay_heap_.clear();
  Replay r{slot, sim_.now()};
  // Roots by their static dependency count, in id order, as start_graph starts them.
  const auto size = static_cast<TaskId>(p.size());
  for (TaskId i = 0; i < size; ++i)
    if (p.dependency_count(i) == 0) replay_ready(r, i);
  while (!replay_heap_.empty()) {
    std::pop_heap(replay_heap_.begin(), replay_heap_.end(), replay_later);
    const ReplayEvent e = replay_heap_.back();
    replay_heap_.pop_back();
    r.now = e.at;
    ++r.events;
    const Task& t = graphs_[slot].plan->task(e.id);
    if (t.kind == TaskKind::kCompute) {
      // kick_stream's completion: the stream frees, the task finishes, the stream takes its next.
      replay_streams_[static_cast<std::size_t>(t.gpu)].busy = false;
      replay_finish(r, e.id);
      replay_kick(r, t.gpu);
    } else {
      replay_finish(r, e.id);
    }
  }
  if (!r.complete && size > 0) {
    Graph& g = graphs_[slot];
    const std::size_t missing = p.size() - g.done;
    release(slot);
    throw std::logic_error("plan stalled: " + std::to_string(missing) + " tasks never ran");
  }
  // Delivered by one event where the last completion would have delivered it; a graph without
  // timed tasks (joins only, or empty) by an event at once, as submit's deferred completion.
  if (r.events > 1) sim_.count_events(r.events - 1);
  alone_in_flight_ = true;
  sim_.at(r.events > 0 ? r.now : sim_.now(), [this, slot] {
    alone_in_flight_ = false;
    deliver(slot);
  }, EventPriority::kCompletion);
}

void PlanExecutor::replay_schedule(Replay& r, Tick delay, TaskId id) {
  // Simulator::after's checks, so that a run out of range fails as it would there.
  const Tick at = checked_add(r.now, delay);
  if (at > kTickLimit) throw TimeRangeError("an event past the simulated time range (~53 days)");
  replay_heap_.push_back(ReplayEvent{at, r.seq++, id});
  std::push_heap(replay_heap_.begin(), replay_heap_.end(), replay_later);
}

void PlanExecutor::replay_ready(Replay& r, TaskId id) {
  Graph& g = graphs_[r.slot];
  const Task& t = g.plan->task(id);
  TaskTiming& tm = g.timing[id];
  tm.ready = r.now;
  switch (t.kind) {
    case TaskKind::kJoin:
      tm.start = r.now;
      replay_finish(r, id);
      break;
    case TaskKind::kDelay:
    case TaskKind::kCollective: {
      tm.start = r.now;
      if (t.ops_count > 0 && !hooks_.host_time) throw std::logic_error("a host task, and no host_time hook to price it");
      const Tick d = t.ops_count > 0 ? hooks_.host_time(t, g.plan->ops_of(t)) : t.delay;
      replay_schedule(r, repeated(d, t.repeat), id);
      break;
    }
    case TaskKind::kCompute: {
      if (t.gpu < 0 || static_cast<std::size_t>(t.gpu) >= compute_.size())
        throw std::logic_error("compute task on unknown GPU " + std::to_string(t.gpu));
      replay_streams_[static_cast<std::size_t>(t.gpu)].ready.push_back(id);
      replay_kick(r, t.gpu);
      break;
    }
    case TaskKind::kTransfer:
      throw std::logic_error("submit_alone replayed a plan with a transfer");
  }
}

void PlanExecutor::replay_kick(Replay& r, int gpu) {
  ReplayStream& s = replay_streams_[static_cast<std::size_t>(gpu)];
  if (s.busy || s.head == s.ready.size()) return;
  Graph& g = graphs_[r.slot];
  // pop_next: FIFO, or the chooser's pick when it has a real choice.
  const std::size_t waiting = s.ready.size() - s.head;
  std::size_t pick = 0;
  if (waiting > 1 && chooser_) {
    scratch_.clear();
    for (std::size_t k = s.head; k < s.ready.size(); ++k) {
      const TaskId w = s.ready[k];
      scratch_.push_back(ReadyTask{g.id, w, &g.plan->task(w), g.timing[w].ready});
    }
    pick = chooser_pick(gpu, waiting);
  }
  const TaskId id = take_waiting(s.ready, s.head, pick);
  s.busy = true;
  const Task& t = g.plan->task(id);
  g.timing[id].start = r.now;
  replay_schedule(r, repeated(hooks_.compute_time(t, g.plan->ops_of(t)), t.repeat), id);
}

void PlanExecutor::replay_finish(Replay& r, TaskId id) {
  Graph& g = graphs_[r.slot];
  g.timing[id].end = r.now;
  if (++g.done == g.plan->size()) {
    r.complete = true;
    return;
  }
  const std::span<const TaskId> succ = g.plan->successors(id);
  for (const TaskId next : succ)
    if (--g.pending_deps[next] == 0) replay_ready(r, next);
}

}  // namespace moesim
