#pragma once
// The main loop: pops events in (tick, priority, sequence) order and asserts causality.
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "sim/event_queue.hpp"
#include "sim/tick.hpp"

namespace moesim {

/// Thrown when an event is scheduled in the past: always a simulator bug, never user input.
class CausalityError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Discrete-event simulator kernel. Entities schedule callbacks; run() drains the queue.
class Simulator {
 public:
  Tick now() const { return now_; }
  /// Schedules `cb` (any void() callable) at absolute tick `at` (>= now()).
  template <class F>
  void at(Tick at, F&& cb, EventPriority p = EventPriority::kDefault) {
    if (at < now_) throw_past(at);
    if (at > kTickLimit) throw TimeRangeError("an event past the simulated time range (~53 days)");
    queue_.push(at, p, std::forward<F>(cb));
  }
  /// Schedules `cb` after `delay` ticks (>= 0).
  template <class F>
  void after(Tick delay, F&& cb, EventPriority p = EventPriority::kDefault) {
    at(checked_add(now_, delay), std::forward<F>(cb), p);
  }
  /// Runs until no events remain (or until `limit` ticks). Returns the number of events run.
  std::uint64_t run(Tick limit = kTickMax);
  std::uint64_t events_run() const { return events_run_; }
  /// Counts `n` events run outside the queue: a graph replayed alone (PlanExecutor::submit_alone)
  /// runs its tasks' completions in a loop of its own, in the order this queue would have, and
  /// counts them here so that events_run() stays what running them here would give.
  void count_events(std::uint64_t n) { events_run_ += n; }
  EventQueue& queue() { return queue_; }

 private:
  [[noreturn]] void throw_past(Tick at) const;

  EventQueue queue_;
  Tick now_ = 0;
  std::uint64_t events_run_ = 0;
};

}  // namespace moesim
