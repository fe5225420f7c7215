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
/// Only whether an activity runs matters at each instant, so overlapping intervals of one
/// activity are merged as they arrive (an all-to-all's flows overlap) and only their union is
/// swept.
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
    int delta;  ///< +1 an interval of `activity` starts at `at`, -1 one ends
  };
  /// The union of a run of overlapping intervals of one activity, not yet turned into edges.
  struct Open {
    Tick begin = 0, end = 0;
    bool held = false;
  };
  static constexpr int kActivities = 4;
  void flush(int activity);
  std::vector<Edge> edges_;
  Open open_[kActivities];
};

/// The breakdown of every MoE layer of an executed batch plan (layers with a router task), in
/// layer order; the batch started at `start`.
std::vector<LayerBreakdown> moe_layer_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing, Tick start);

}  // namespace moesim
