#pragma once
// An indexed binary min-heap of (tick, slot): each slot has at most one entry, whose tick can be
// moved in place. The flow network keeps its flows' completion ticks here; a lazy heap would
// collect a stale entry for every rate change (most of them, in an all-to-all) and pay to pop it.
#include <cstdint>
#include <vector>

#include "sim/tick.hpp"

namespace moesim {

/// Min-heap of completion ticks keyed by slot; ties go to the lower slot.
class DueHeap {
 public:
  static constexpr std::uint32_t kAbsent = 0xffffffffu;

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  Tick top_tick() const { return heap_.front().at; }
  std::uint32_t top_slot() const { return heap_.front().slot; }

  /// Inserts `slot` at `at`, or moves its entry there.
  void set(std::uint32_t slot, Tick at) {
    if (slot >= pos_.size()) pos_.resize(slot + 1, kAbsent);
    std::uint32_t i = pos_[slot];
    if (i == kAbsent) {
      i = static_cast<std::uint32_t>(heap_.size());
      heap_.push_back(Entry{at, slot});
      pos_[slot] = i;
      up(i);
      return;
    }
    const Entry old = heap_[i];
    heap_[i].at = at;
    if (less(heap_[i], old))
      up(i);
    else
      down(i);
  }
  /// Removes `slot`'s entry if it has one.
  void erase(std::uint32_t slot) {
    if (slot >= pos_.size() || pos_[slot] == kAbsent) return;
    const std::uint32_t i = pos_[slot];
    pos_[slot] = kAbsent;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    heap_[i] = last;
    pos_[last.slot] = i;
    up(i);
    down(pos_[last.slot]);
  }
  void pop() { erase(top_slot()); }

 private:
  struct Entry {
    Tick at;
    std::uint32_t slot;
  };
  static bool less(const Entry& a, const Entry& b) { return a.at != b.at ? a.at < b.at : a.slot < b.slot; }
  void place(std::uint32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.slot] = i;
  }
  void up(std::uint32_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const std::uint32_t parent = (i - 1) / 2;
      if (!less(e, heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, e);
  }
  void down(std::uint32_t i) {
    const Entry e = heap_[i];
    const auto n = static_cast<std::uint32_t>(heap_.size());
    for (;;) {
      std::uint32_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && less(heap_[child + 1], heap_[child])) ++child;
      if (!less(heap_[child], e)) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, e);
  }

  std::vector<Entry> heap_;
  std::vector<std::uint32_t> pos_;  ///< per slot, its index in heap_ (kAbsent: none)
};

}  // namespace moesim
