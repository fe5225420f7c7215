#include "app/gpu_time.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

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

struct Edge {
  Tick at;
  int cls;
  int delta;  ///< +1 an activity of class `cls` begins, -1 one ends
};

}  // namespace

GpuTime& GpuTime::operator+=(const GpuTime& o) {
  for (int c = 0; c <= kClasses; ++c) slot(*this, c) += slot(o, c);
  return *this;
}

std::vector<GpuTime> gpu_time_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                        int num_gpus, Tick start, Tick end) {
  std::vector<std::vector<Edge>> edges(static_cast<std::size_t>(num_gpus));
  for (TaskId id = 0; id < plan.size(); ++id) {
    const Tick s = std::max(timing[id].start, start), e = std::min(timing[id].end, end);
    if (e <= s) continue;
    for (const GpuUse& use : gpu_uses(plan.task(id), num_gpus)) {
      auto& ev = edges[static_cast<std::size_t>(use.gpu)];
      ev.push_back({s, class_of(use.activity), +1});
      ev.push_back({e, class_of(use.activity), -1});
    }
  }
  std::vector<GpuTime> out(static_cast<std::size_t>(num_gpus));
  for (int g = 0; g < num_gpus; ++g) {
    auto& ev = edges[static_cast<std::size_t>(g)];
    std::sort(ev.begin(), ev.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
    // Sweep: each stretch between consecutive edges goes to the highest-precedence active class.
    std::array<int, kClasses> active{};
    Tick prev = start;
    GpuTime& t = out[static_cast<std::size_t>(g)];
    for (std::size_t i = 0; i < ev.size();) {
      const Tick at = ev[i].at;
      const auto top = std::find_if(active.begin(), active.end(), [](int n) { return n > 0; });
      if (top != active.end()) slot(t, static_cast<int>(top - active.begin())) += at - prev;
      for (; i < ev.size() && ev[i].at == at; ++i) active[static_cast<std::size_t>(ev[i].cls)] += ev[i].delta;
      prev = at;
    }
    t.waiting = std::max<Tick>(0, end - start) - (t.compute + t.copy + t.communication + t.scheduling);
  }
  return out;
}

nlohmann::json gpu_time_json(const std::vector<GpuTime>& per_gpu, Tick makespan) {
  nlohmann::json gpus = nlohmann::json::array();
  std::array<double, kClasses + 1> fraction{};
  for (const GpuTime& t : per_gpu) {
    nlohmann::json g;
    for (int c = 0; c <= kClasses; ++c) {
      g[kClassNames[static_cast<std::size_t>(c)]] = ticks_to_ms(slot(t, c));
      if (makespan > 0) fraction[static_cast<std::size_t>(c)] += static_cast<double>(slot(t, c)) / static_cast<double>(makespan);
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
