#include "app/run/gpu_time.hpp"

#include <algorithm>
#include <iterator>

#include "sim/chrome_trace.hpp"

namespace moesim {

namespace {

// Breakdown classes in precedence order; waiting is whatever no class claims.
enum Class { kComputeClass, kCopyClass, kCommunicationClass, kSchedulingClass, kClasses };
constexpr std::array<const char*, kClasses + 1> kClassNames = {"compute", "copy", "communication", "scheduling",
                                                               "waiting"};

Class class_of(GpuActivity a) {
  switch (a) {
    case GpuActivity::kCompute: return kComputeClass;
    case GpuActivity::kCopy: return kCopyClass;
    case GpuActivity::kSend:
    case GpuActivity::kReceive: return kCommunicationClass;
    case GpuActivity::kSchedule: return kSchedulingClass;
  }
  return kSchedulingClass;
}

// The field of class `c` (waiting for c == kClasses), const or not as `t` is.
template <class T>
auto& slot(T& t, int c) {
  switch (c) {
    case kComputeClass: return t.compute;
    case kCopyClass: return t.copy;
    case kCommunicationClass: return t.communication;
    case kSchedulingClass: return t.scheduling;
    default: return t.waiting;
  }
}

}  // namespace

GpuTime& GpuTime::operator+=(const GpuTime& o) {
  for (int c = 0; c <= kClasses; ++c) slot(*this, c) += slot(o, c);
  return *this;
}

GpuTimeSweep::GpuTimeSweep(int num_gpus, Tick start, Tick end)
    : start_(start), end_(end), lanes_(static_cast<std::size_t>(num_gpus)) {
  for (Lane& lane : lanes_) lane.prev = start;
}

void GpuTimeSweep::add(const Task& t, const TaskTiming& timing) {
  const Tick s = std::max(timing.start, start_), e = std::min(timing.end, end_);
  if (e <= s) return;
  for (const GpuUse& use : gpu_uses(t, static_cast<int>(lanes_.size()))) {
    Lane& lane = lanes_[static_cast<std::size_t>(use.gpu)];
    if (!lane.dirty) {
      lane.dirty = true;
      dirty_.push_back(use.gpu);
    }
    const int cls = class_of(use.activity);
    Open& o = lane.open[static_cast<std::size_t>(cls)];
    if (o.held && s <= o.end && e >= o.begin) {
      o.begin = std::min(o.begin, s);
      o.end = std::max(o.end, e);
      continue;
    }
    if (o.held) {
      lane.pending.push_back({o.begin, cls, +1});
      lane.pending.push_back({o.end, cls, -1});
    }
    o = Open{s, e, true};
  }
}

void GpuTimeSweep::flush(Lane& lane) {
  for (int cls = 0; cls < kClasses; ++cls) {
    Open& o = lane.open[static_cast<std::size_t>(cls)];
    if (!o.held) continue;
    lane.pending.push_back({o.begin, cls, +1});
    lane.pending.push_back({o.end, cls, -1});
    o.held = false;
  }
}

// Each stretch between consecutive edges goes to the highest-precedence active class. Edges at one
// instant are applied together, so their order (the sort is not stable) does not matter. What the
// last sweep left is in order already: only the edges added since are sorted, then merged in.
void GpuTimeSweep::sweep(Lane& lane, Tick horizon) {
  auto& ev = lane.pending;
  const auto by_tick = [](const Edge& a, const Edge& b) { return a.at < b.at; };
  const auto mid = ev.begin() + static_cast<std::ptrdiff_t>(lane.sorted);
  std::sort(mid, ev.end(), by_tick);
  if (mid != ev.begin() && mid != ev.end() && by_tick(*mid, *(mid - 1))) {
    merged_.clear();
    std::merge(ev.begin(), mid, mid, ev.end(), std::back_inserter(merged_), by_tick);
    ev.swap(merged_);
  }
  std::size_t i = 0;
  while (i < ev.size() && ev[i].at < horizon) {
    const Tick at = ev[i].at;
    const auto top = std::find_if(lane.active.begin(), lane.active.end(), [](int n) { return n > 0; });
    if (top != lane.active.end()) slot(lane.time, static_cast<int>(top - lane.active.begin())) += at - lane.prev;
    for (; i < ev.size() && ev[i].at == at; ++i) lane.active[static_cast<std::size_t>(ev[i].cls)] += ev[i].delta;
    lane.prev = at;
  }
  ev.erase(ev.begin(), ev.begin() + static_cast<std::ptrdiff_t>(i));
  lane.sorted = ev.size();
}

void GpuTimeSweep::advance(Tick horizon) {
  std::size_t kept = 0;
  for (const int g : dirty_) {
    Lane& lane = lanes_[static_cast<std::size_t>(g)];
    flush(lane);
    sweep(lane, horizon);
    lane.dirty = !lane.pending.empty();
    if (lane.dirty) dirty_[kept++] = g;
  }
  dirty_.resize(kept);
}

std::vector<GpuTime> GpuTimeSweep::finish(Tick end) {
  std::vector<GpuTime> out;
  finish_into(end, out);
  return out;
}

void GpuTimeSweep::finish_into(Tick end, std::vector<GpuTime>& out) {
  advance(kTickMax);  // task ends are finite: every edge is swept
  out.clear();
  out.reserve(lanes_.size());
  for (const Lane& lane : lanes_) {
    GpuTime t = lane.time;
    t.waiting = std::max<Tick>(0, end - start_) - (t.compute + t.copy + t.communication + t.scheduling);
    out.push_back(t);
  }
}

void GpuTimeSweep::reset(Tick start) {
  start_ = start;
  end_ = kTickMax;
  for (Lane& lane : lanes_) {
    lane.open = {};
    lane.pending.clear();
    lane.sorted = 0;
    lane.active = {};
    lane.prev = start;
    lane.time = GpuTime{};
    lane.dirty = false;
  }
  dirty_.clear();
}

std::vector<GpuTime> gpu_time_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                        int num_gpus, Tick start, Tick end) {
  GpuTimeSweep sweep(num_gpus, start, end);
  for (TaskId id = plan.first(); id < plan.size(); ++id) sweep.add(plan.task(id), timing[id]);
  return sweep.finish(end);
}

nlohmann::json gpu_time_json(const std::vector<GpuTime>& per_gpu, Tick makespan) {
  nlohmann::json gpus = nlohmann::json::array();
  std::array<double, kClasses + 1> fraction{};
  for (const GpuTime& t : per_gpu) {
    nlohmann::json g;
    for (int c = 0; c <= kClasses; ++c) {
      g[kClassNames[static_cast<std::size_t>(c)]] = ticks_to_ms(slot(t, c));
      if (makespan > 0)
        fraction[static_cast<std::size_t>(c)] += static_cast<double>(slot(t, c)) / static_cast<double>(makespan);
    }
    gpus.push_back(std::move(g));
  }
  nlohmann::json mean;
  for (int c = 0; c <= kClasses; ++c)
    mean[kClassNames[static_cast<std::size_t>(c)]] =
        per_gpu.empty() ? 0.0 : fraction[static_cast<std::size_t>(c)] / static_cast<double>(per_gpu.size());
  return {{"per_gpu_ms", gpus}, {"mean_fraction", mean}};
}

}  // namespace moesim
