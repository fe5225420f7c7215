#include "sim/simulator.hpp"

#include <string>

namespace moesim {

void Simulator::throw_past(Tick at) const {
  throw CausalityError("event scheduled at tick " + std::to_string(at) + " before now (" + std::to_string(now_) + ")");
}

std::uint64_t Simulator::run(Tick limit) {
  std::uint64_t n = 0;
  while (!queue_.empty() && queue_.next_tick() <= limit) {
    Tick t;
    EventQueue::Callback cb = queue_.take_top(t);
    // The taken event leaves the queue after its callback, or as the callback throws.
    struct Finish {
      EventQueue& q;
      ~Finish() { q.finish_top(); }
    } finish{queue_};
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
