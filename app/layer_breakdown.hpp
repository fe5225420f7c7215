#pragma once
// Where a MoE layer's latency goes, as MoE-GPS Fig. 6 stacks it (attention, FFN, communication,
// prediction overhead). Each instant of a layer's window — from the end of the previous layer to
// the end of this one — is attributed to the highest-precedence activity running on any GPU at
// that instant: FFN > attention > communication > overhead; instants with nothing running (a
// collective's launch latency, waiting on a barrier with no work left) are `idle`. The parts
// therefore sum exactly to the layer's latency.
#include <utility>
#include <vector>

#include "sim/plan_executor.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// One layer's latency by activity, in milliseconds.
struct LayerBreakdown {
  double attention = 0.0;      ///< attention, router, and the merge of expert outputs (compute)
  double ffn = 0.0;            ///< routed and shared expert computation
  double communication = 0.0;  ///< token dispatch/combine, collectives, weight copies and fetches
  double overhead = 0.0;       ///< a predictor's overhead and a policy's CPU-side scheduling
  double idle = 0.0;           ///< nothing running on any GPU
  double total() const { return attention + ffn + communication + overhead + idle; }
};

/// One layer's activity intervals, gathered task by task as they finish (a batch that runs while
/// it is planned hands its tasks over a part at a time), then swept into the layer's breakdown.
class LayerSweep {
 public:
  /// Counts a finished task of the layer (joins and instant tasks count nowhere).
  void add(const Task& t, const TaskTiming& timing);
  /// The breakdown over the layer's window [from, to]; forgets the intervals.
  LayerBreakdown take(Tick from, Tick to);

 private:
  struct Edge {
    Tick at;
    int activity;
    int delta;  ///< intervals of `activity` starting (> 0) or ending (< 0) at `at`
  };
  static constexpr int kActivities = 4;
  static constexpr std::size_t kNone = ~std::size_t{0};
  void push(std::size_t& last, Tick at, int activity, int delta);
  std::vector<Edge> edges_;
  // Per activity, the last start and end edges: an edge at the same instant adds to them (an
  // all-to-all's flows start together and many end together).
  std::size_t last_start_[kActivities] = {kNone, kNone, kNone, kNone};
  std::size_t last_end_[kActivities] = {kNone, kNone, kNone, kNone};
};

/// The breakdown of every MoE layer of an executed batch plan (layers with a router task), in
/// layer order; the batch started at `start`.
std::vector<LayerBreakdown> moe_layer_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing, Tick start);

}  // namespace moesim
