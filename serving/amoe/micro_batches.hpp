#pragma once
// Ping-pong pipelining over the same disaggregated deployment as AMoE (MegaScale-Infer's
// micro-batches): each iteration's requests are split into M micro-batches; a micro-batch moves
// through the blocks synchronously — an attention GPU runs block b of micro-batch m once every
// token of m it holds is back, an expert GPU runs it once every attention GPU's dispatch of (b, m)
// has arrived (the all-to-all's barrier) — while the other micro-batches fill the other pool. New
// requests join at the next iteration. This class is the barrier bookkeeping; the engine
// (layer_queues.cpp) moves the tokens.
#include <cstdint>
#include <vector>

namespace moesim {

/// Which (block, micro-batch) each GPU may run, given what has arrived.
class MicroBatchBarrier {
 public:
  MicroBatchBarrier(int attention_gpus, int gpus, int blocks, int micro_batches);

  int micro_batches() const { return M_; }
  /// Starts an iteration: `items[a][m]` requests of micro-batch m live on attention GPU a.
  void begin(const std::vector<std::vector<std::int64_t>>& items);
  bool running() const { return running_; }
  /// A request's tokens of micro-batch m are at attention GPU a, ready for block b.
  void attention_arrived(int a, int b, int m);
  /// An attention GPU's dispatch of (b, m) has reached expert GPU x.
  void message_arrived(int x, int b, int m);
  /// Every request of m on a is there for block b (and there is at least one).
  bool attention_ready(int a, int b, int m) const;
  /// Every attention GPU holding requests of m has dispatched (b, m) to x.
  bool expert_ready(int x, int b, int m) const;
  /// A request finished the iteration's last block; true when it was the iteration's last.
  bool finish_item();

 private:
  std::size_t at(int gpu, int b, int m) const;
  int A_, G_, B_, M_;
  bool running_ = false;
  std::vector<std::int64_t> expected_;      ///< [a][m] requests
  std::vector<int> senders_;                ///< [m] attention GPUs holding requests of m
  std::vector<std::int64_t> arrived_;       ///< [gpu][b][m] items (attention) or messages (experts)
  std::int64_t left_ = 0;                   ///< requests still in the iteration
};

}  // namespace moesim
