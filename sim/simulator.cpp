#include "sim/simulator.hpp"

#include <string>

namespace moesim {

void Simulator::at(Tick at, EventQueue::Callback cb, EventPriority p) {
  if (at < now_) {
    throw CausalityError("event scheduled at tick " + std::to_string(at) + " before now (" +
                         std::to_string(now_) + ")");
  }
  queue_.push(at, p, std::move(cb));
}

std::uint64_t Simulator::run(Tick limit) {
  std::uint64_t n = 0;
  while (!queue_.empty() && queue_.next_tick() <= limit) {
    Tick t;
    auto cb = queue_.pop(t);
    // Causality: the queue's order guarantees this; the check catches heap corruption.
    if (t < now_) throw CausalityError("event queue returned a past event");
    now_ = t;
    cb();
    ++n;
  }
  events_run_ += n;
  return n;
}

}  // namespace moesim
