#include "serving/amoe/micro_batches.hpp"

#include <algorithm>
#include <stdexcept>

namespace moesim {

MicroBatchBarrier::MicroBatchBarrier(int attention_gpus, int gpus, int blocks, int micro_batches)
    : A_(attention_gpus), G_(gpus), B_(blocks), M_(micro_batches) {
  if (M_ < 1) throw std::logic_error("MicroBatchBarrier: at least one micro-batch");
}

std::size_t MicroBatchBarrier::at(int gpu, int b, int m) const {
  return (static_cast<std::size_t>(gpu) * static_cast<std::size_t>(B_) + static_cast<std::size_t>(b)) *
             static_cast<std::size_t>(M_) + static_cast<std::size_t>(m);
}

void MicroBatchBarrier::begin(const std::vector<std::vector<std::int64_t>>& items) {
  expected_.assign(static_cast<std::size_t>(A_ * M_), 0);
  senders_.assign(static_cast<std::size_t>(M_), 0);
  arrived_.assign(static_cast<std::size_t>(G_) * static_cast<std::size_t>(B_) * static_cast<std::size_t>(M_), 0);
  left_ = 0;
  for (int a = 0; a < A_; ++a)
    for (int m = 0; m < M_; ++m) {
      const std::int64_t n = items[static_cast<std::size_t>(a)][static_cast<std::size_t>(m)];
      expected_[static_cast<std::size_t>(a * M_ + m)] = n;
      senders_[static_cast<std::size_t>(m)] += n > 0 ? 1 : 0;
      left_ += n;
    }
  running_ = left_ > 0;
}

void MicroBatchBarrier::attention_arrived(int a, int b, int m) { ++arrived_[at(a, b, m)]; }
void MicroBatchBarrier::message_arrived(int x, int b, int m) { ++arrived_[at(x, b, m)]; }

bool MicroBatchBarrier::attention_ready(int a, int b, int m) const {
  const std::int64_t n = expected_[static_cast<std::size_t>(a * M_ + m)];
  return n > 0 && arrived_[at(a, b, m)] == n;
}

bool MicroBatchBarrier::expert_ready(int x, int b, int m) const {
  const int n = senders_[static_cast<std::size_t>(m)];
  return n > 0 && arrived_[at(x, b, m)] == n;
}

bool MicroBatchBarrier::finish_item() {
  if (--left_ > 0) return false;
  running_ = false;
  return true;
}

}  // namespace moesim
