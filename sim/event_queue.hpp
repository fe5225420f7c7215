#pragma once
// The future event list: a binary heap with a total order on (tick, priority, insertion sequence),
// so equal-time events run in a reproducible order (as SST and ns-3 do).
#include <cstdint>
#include <functional>
#include <vector>

#include "sim/tick.hpp"

namespace moesim {

/// Priority classes for events at the same tick; lower runs first.
enum class EventPriority : std::uint8_t {
  kCompletion = 0,  ///< a task or flow finishing frees its resource
  kDefault = 1,     ///< ordinary work
  kStart = 2,       ///< starting new work after every completion at this tick is known
  kReallocate = 3,  ///< network rate recomputation, once per tick after all changes
  kStats = 4,
};

/// Min-heap of events. Callbacks live in a slot array so the heap moves 24-byte keys only.
class EventQueue {
 public:
  using Callback = std::function<void()>;

  /// Schedules `cb` at `tick`. Returns the event's sequence number.
  std::uint64_t push(Tick tick, EventPriority priority, Callback cb);
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  /// Tick of the next event; the queue must not be empty.
  Tick next_tick() const { return heap_.front().tick; }
  /// Removes the next event, stores its tick in `tick`, and returns its callback.
  Callback pop(Tick& tick);
  void reserve(std::size_t n);

 private:
  struct Key {
    Tick tick;
    std::uint64_t order;  ///< priority in the top 8 bits, insertion sequence below
    std::uint32_t slot;
    bool operator<(const Key& o) const { return tick != o.tick ? tick < o.tick : order < o.order; }
  };
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);

  std::vector<Key> heap_;
  std::vector<Callback> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t sequence_ = 0;
};

}  // namespace moesim
