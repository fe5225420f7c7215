#include "sim/event_queue.hpp"

#include <cassert>
#include <utility>

namespace moesim {

std::uint64_t EventQueue::push(Tick tick, EventPriority priority, Callback cb) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(cb);
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(std::move(cb));
  }
  const std::uint64_t seq = sequence_++;
  assert(seq < (1ULL << 56) && "event sequence overflow");
  heap_.push_back(Key{tick, (static_cast<std::uint64_t>(priority) << 56) | seq, slot});
  sift_up(heap_.size() - 1);
  return seq;
}

EventQueue::Callback EventQueue::pop(Tick& tick) {
  assert(!heap_.empty());
  const Key top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0);
  tick = top.tick;
  Callback cb = std::move(slots_[top.slot]);
  slots_[top.slot] = nullptr;
  free_slots_.push_back(top.slot);
  return cb;
}

void EventQueue::reserve(std::size_t n) {
  heap_.reserve(n);
  slots_.reserve(n);
  free_slots_.reserve(n);
}

void EventQueue::sift_up(std::size_t i) {
  const Key k = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!(k < heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = k;
}

void EventQueue::sift_down(std::size_t i) {
  const std::size_t n = heap_.size();
  const Key k = heap_[i];
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < k)) break;
    heap_[i] = heap_[child];
    i = child;
  }
  heap_[i] = k;
}

}  // namespace moesim
