#include "app/run/layer_breakdown.hpp"
#include "hardware/phase.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

namespace moesim {
namespace {

// Activities in precedence order (lower index wins an instant).
enum Activity { kFfn = 0, kAttention, kCommunication, kOverhead, kActivities };

/// The activity a task counts as, or kActivities for tasks that are not work (joins).
int activity_of(const Task& t) {
  switch (t.kind) {
    case TaskKind::kCompute: return t.phase == phase::kExperts || t.phase == phase::kDense ? kFfn : kAttention;
    case TaskKind::kTransfer:
    case TaskKind::kCollective: return kCommunication;
    case TaskKind::kDelay:
      // CPU-side costs a policy or predictor declares; other delays are collective launches.
      return t.phase == phase::kPredict || t.phase == phase::kSchedule ? kOverhead : kCommunication;
    case TaskKind::kJoin: return kActivities;
  }
  return kActivities;
}

}  // namespace

static_assert(kActivities == 4, "LayerSweep merges intervals of four activities");

void LayerSweep::add(const Task& t, const TaskTiming& timing) {
  const int a = activity_of(t);
  if (a == kActivities || timing.end <= timing.start) return;
  Open& o = open_[a];
  if (o.held && timing.start <= o.end && timing.end >= o.begin) {
    o.begin = std::min(o.begin, timing.start);
    o.end = std::max(o.end, timing.end);
    return;
  }
  flush(a);
  o = Open{timing.start, timing.end, true};
}

void LayerSweep::flush(int activity) {
  Open& o = open_[activity];
  if (!o.held) return;
  edges_.push_back({o.begin, activity, +1});
  edges_.push_back({o.end, activity, -1});
  o.held = false;
}

// Edges at one instant are applied one after the other, but only the first credits any time (the
// rest find the clock already there): their order does not matter.
LayerBreakdown LayerSweep::take(Tick from, Tick to) {
  for (int a = 0; a < kActivities; ++a) flush(a);
  std::sort(edges_.begin(), edges_.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::array<int, kActivities> running{};
  std::array<Tick, kActivities + 1> spent{};  // the last slot is idle
  Tick t = from;
  auto credit = [&](Tick until) {
    const Tick a = std::max(t, from), b = std::min(until, to);
    if (b > a) {
      int who = kActivities;
      for (int k = 0; k < kActivities; ++k)
        if (running[static_cast<std::size_t>(k)] > 0) {
          who = k;
          break;
        }
      spent[static_cast<std::size_t>(who)] += b - a;
    }
    t = std::max(t, until);
  };
  for (const Edge& e : edges_) {
    credit(e.at);
    running[static_cast<std::size_t>(e.activity)] += e.delta;
  }
  credit(to);
  edges_.clear();
  LayerBreakdown b;
  b.ffn = ticks_to_ms(spent[kFfn]);
  b.attention = ticks_to_ms(spent[kAttention]);
  b.communication = ticks_to_ms(spent[kCommunication]);
  b.overhead = ticks_to_ms(spent[kOverhead]);
  b.idle = ticks_to_ms(spent[kActivities]);
  return b;
}

std::vector<LayerBreakdown> moe_layer_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                                Tick start) {
  int layers = 0;
  for (const Task& t : plan.tasks()) layers = std::max(layers, t.layer + 1);
  std::vector<Tick> layer_end(static_cast<std::size_t>(layers), start);
  std::vector<char> is_moe(static_cast<std::size_t>(layers), 0);
  std::vector<LayerSweep> sweeps(static_cast<std::size_t>(layers));
  for (TaskId id = plan.first(); id < plan.size(); ++id) {
    const Task& t = plan.task(id);
    if (t.layer < 0) continue;
    const auto l = static_cast<std::size_t>(t.layer);
    layer_end[l] = std::max(layer_end[l], timing[id].end);
    if (t.kind == TaskKind::kCompute && t.phase == phase::kRouter) is_moe[l] = 1;
    sweeps[l].add(t, timing[id]);
  }
  std::vector<LayerBreakdown> out;
  Tick prev = start;
  for (std::size_t l = 0; l < sweeps.size(); ++l) {
    const Tick from = prev, to = std::max(prev, layer_end[l]);
    prev = to;
    if (is_moe[l]) out.push_back(sweeps[l].take(from, to));
  }
  return out;
}

}  // namespace moesim
