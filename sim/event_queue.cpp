#include "sim/event_queue.hpp"

#include <cassert>

namespace moesim {


std::uint64_t EventQueue::push_key(Tick tick, EventPriority priority, std::uint32_t slot) {
  const std::uint64_t seq = sequence_++;
  assert(seq < (1ULL << 56) && "event sequence overflow");
  const Key k{tick, (static_cast<std::uint64_t>(priority) << 56) | seq, slot};
  if (top_taken_) {  // the new key replaces the taken one
    top_taken_ = false;
    sift_down_from_top(k);
    return seq;
  }
  std::size_t i = heap_.size();
  heap_.emplace_back();
  Key* h = heap_.data();
  while (i > 0) {
    const std::size_t parent = (i - 1) / kArity;
    if (!less(k, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = k;
  return seq;
}

std::size_t EventQueue::least_child(std::size_t c, std::size_t n) const {
  const Key* h = heap_.data();
  if (c + kArity <= n) {
    const std::size_t a = less(h[c + 1], h[c]) ? c + 1 : c;
    const std::size_t b = less(h[c + 3], h[c + 2]) ? c + 3 : c + 2;
    return less(h[b], h[a]) ? b : a;
  }
  std::size_t best = c;
  for (std::size_t i = c + 1; i < n; ++i) best = less(h[i], h[best]) ? i : best;
  return best;
}

void EventQueue::sift_down_from_top(const Key& k) {
  Key* h = heap_.data();
  const std::size_t n = heap_.size();
  std::size_t hole = 0;
  for (std::size_t c; (c = kArity * hole + 1) < n;) {
    const std::size_t best = least_child(c, n);
    if (!less(h[best], k)) break;
    h[hole] = h[best];
    hole = best;
  }
  h[hole] = k;
}

// Floyd's removal: the hole left by the top descends to a leaf along the least children, then
// the last key fills it and rises: rarely far, as it is among the latest.
void EventQueue::remove_top() {
  assert(!heap_.empty());
  top_taken_ = false;
  Key* h = heap_.data();
  const std::size_t n = heap_.size() - 1;
  const Key last = h[n];
  heap_.pop_back();
  if (n == 0) return;
  std::size_t hole = 0;
  for (std::size_t c; (c = kArity * hole + 1) < n;) {
    const std::size_t best = least_child(c, n);
    h[hole] = h[best];
    hole = best;
  }
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / kArity;
    if (!less(last, h[parent])) break;
    h[hole] = h[parent];
    hole = parent;
  }
  h[hole] = last;
}

void EventQueue::reserve(std::size_t n) {
  heap_.reserve(n);
  slots_.reserve(n);
  free_slots_.reserve(n);
}

}  // namespace moesim
