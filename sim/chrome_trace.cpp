#include "sim/chrome_trace.hpp"

#include <fstream>
#include <stdexcept>

namespace moesim {

namespace {
enum Lane { kComputeLane = 0, kCopyLane = 1, kNetworkLane = 2 };
const char* lane_name(int lane) {
  switch (lane) {
    case kComputeLane: return "compute";
    case kCopyLane: return "copy engine";
    default: return "network";
  }
}
}  // namespace

ChromeTrace::ChromeTrace(int num_gpus) {
  for (int g = 0; g < num_gpus; ++g) {
    events_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", g}, {"args", {{"name", "GPU " + std::to_string(g)}}}});
    events_.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", g}, {"args", {{"sort_index", g}}}});
    for (int lane = 0; lane < 3; ++lane)
      events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", g}, {"tid", lane},
                         {"args", {{"name", lane_name(lane)}}}});
  }
}

void ChromeTrace::add_batch(const TaskGraph& plan, const std::vector<TaskTiming>& timing, int batch) {
  for (TaskId id = 0; id < plan.size(); ++id) {
    const Task& t = plan.task(id);
    const TaskTiming& tm = timing[id];
    if (t.kind == TaskKind::kJoin || t.gpu < 0 || tm.end <= tm.start) continue;
    int lane = kComputeLane;
    if (t.kind == TaskKind::kTransfer) lane = t.engine == CopyEngine::kNone ? kNetworkLane : kCopyLane;
    nlohmann::json e = {{"ph", "X"},
                        {"name", std::string(phase_name(t.phase)) + (t.layer >= 0 ? " L" + std::to_string(t.layer) : "")},
                        {"cat", phase_name(t.phase)},
                        {"pid", t.gpu},
                        {"tid", lane},
                        {"ts", ticks_to_us(tm.start)},
                        {"dur", ticks_to_us(tm.end - tm.start)}};
    nlohmann::json args = {{"batch", batch}};
    if (t.kind == TaskKind::kTransfer) {
      args["bytes"] = t.bytes;
      args["src"] = t.src;
      args["dst"] = t.dst;
    }
    e["args"] = args;
    events_.push_back(std::move(e));
  }
}

void ChromeTrace::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write trace " + path);
  out << nlohmann::json{{"traceEvents", events_}, {"displayTimeUnit", "ns"}}.dump() << "\n";
}

}  // namespace moesim
