#include "sim/chrome_trace.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace moesim {

const char* activity_name(GpuActivity a) {
  switch (a) {
    case GpuActivity::kCompute: return "compute";
    case GpuActivity::kCopy: return "copy engine";
    case GpuActivity::kSend: return "network send";
    case GpuActivity::kReceive: return "network receive";
    case GpuActivity::kSchedule: return "schedule (CPU)";
  }
  return "?";
}

GpuUses gpu_uses(const Task& t, int num_gpus) {
  GpuUses u;
  const auto add = [&](int gpu, GpuActivity a) {
    if (gpu >= 0 && gpu < num_gpus) u.items[static_cast<std::size_t>(u.count++)] = {gpu, a};
  };
  switch (t.kind) {
    case TaskKind::kCompute: add(t.gpu, GpuActivity::kCompute); break;
    case TaskKind::kDelay: add(t.gpu, GpuActivity::kSchedule); break;
    case TaskKind::kJoin: break;
    case TaskKind::kCollective:
      // Its GPU's sends and receives, priced together.
      add(t.gpu, GpuActivity::kSend);
      add(t.gpu, GpuActivity::kReceive);
      break;
    case TaskKind::kTransfer:
      if (t.engine != CopyEngine::kNone) {
        add(t.gpu, GpuActivity::kCopy);
      } else {
        // By endpoints rather than the task's stats GPU: a host→GPU flow has only a receiver.
        add(t.src, GpuActivity::kSend);
        add(t.dst, GpuActivity::kReceive);
      }
      break;
  }
  return u;
}

namespace {

const char* engine_name(CopyEngine e) {
  switch (e) {
    case CopyEngine::kHostToDevice: return "host-to-device";
    case CopyEngine::kDeviceToHost: return "device-to-host";
    case CopyEngine::kPeer: return "peer";
    case CopyEngine::kNone: break;
  }
  return "none";
}

// Whole nanoseconds, in microseconds: a slice's ts + dur then equals the next slice's ts exactly
// where they abut, so a viewer never sees a sub-nanosecond overlap from rounding.
double trace_us(Tick t) { return static_cast<double>(t / kPsPerNs) / 1000.0; }
double trace_dur_us(Tick start, Tick end) { return static_cast<double>(end / kPsPerNs - start / kPsPerNs) / 1000.0; }

}  // namespace

ChromeTrace::ChromeTrace(int num_gpus, TagName tag_name)
    : num_gpus_(num_gpus), tag_name_(tag_name), row_end_(static_cast<std::size_t>(num_gpus)) {
  for (int g = 0; g < num_gpus; ++g) {
    events_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", g}, {"args", {{"name", "GPU " + std::to_string(g)}}}});
    events_.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", g}, {"args", {{"sort_index", g}}}});
    // Every lane's first row is named up front, so each GPU shows all its lanes even when idle.
    for (int lane = 0; lane < kGpuActivities; ++lane) {
      row_end_[static_cast<std::size_t>(g)][static_cast<std::size_t>(lane)].push_back(0);
      name_thread(g, static_cast<GpuActivity>(lane), 0);
    }
  }
}

void ChromeTrace::name_thread(int gpu, GpuActivity lane, int row) {
  const int tid = thread_id(lane, row);
  const std::string name = std::string(activity_name(lane)) + (row > 0 ? " #" + std::to_string(row + 1) : "");
  events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", gpu}, {"tid", tid}, {"args", {{"name", name}}}});
  events_.push_back(
      {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", gpu}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
}

int ChromeTrace::take_row(int gpu, GpuActivity lane, Tick start, Tick end) {
  auto& rows = row_end_[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(lane)];
  std::size_t row = 0;
  while (row < rows.size() && rows[row] > start) ++row;
  if (row == rows.size()) {
    if (rows.size() < static_cast<std::size_t>(kRowsPerLane)) {
      rows.push_back(0);
      name_thread(gpu, lane, static_cast<int>(row));
    } else {
      // More concurrent slices than rows: share the last row rather than collide with another lane.
      row = rows.size() - 1;
    }
  }
  rows[row] = std::max(rows[row], end);
  return static_cast<int>(row);
}

void ChromeTrace::add_batch(const TaskGraph& plan, const std::vector<TaskTiming>& timing, int batch) {
  // Rows are handed out first-fit in start order, which uses as few rows as the peak overlap.
  std::vector<TaskId> order;
  for (TaskId id = 0; id < plan.size(); ++id)
    if (timing[id].end > timing[id].start && gpu_uses(plan.task(id), num_gpus_).count > 0) order.push_back(id);
  std::stable_sort(order.begin(), order.end(), [&](TaskId a, TaskId b) { return timing[a].start < timing[b].start; });

  for (const TaskId id : order) {
    const Task& t = plan.task(id);
    const TaskTiming& tm = timing[id];
    nlohmann::json args = {{"batch", batch}};
    if (t.layer >= 0) args["layer"] = t.layer;
    if (t.kind == TaskKind::kTransfer) {
      args["bytes"] = t.bytes;
      args["src"] = t.src;
      args["dst"] = t.dst;
      if (t.engine != CopyEngine::kNone) args["engine"] = engine_name(t.engine);
    } else if (t.kind == TaskKind::kCollective) {
      args["bytes"] = t.bytes;
      args["bytes_across_nodes"] = t.bytes_across_nodes;
    }
    const std::string name = std::string(tag_name_(t.phase)) + (t.layer >= 0 ? " L" + std::to_string(t.layer) : "");
    for (const GpuUse& use : gpu_uses(t, num_gpus_)) {
      const int row = take_row(use.gpu, use.activity, tm.start, tm.end);
      events_.push_back({{"ph", "X"},
                         {"name", name},
                         {"cat", tag_name_(t.phase)},
                         {"pid", use.gpu},
                         {"tid", thread_id(use.activity, row)},
                         {"ts", trace_us(tm.start)},
                         {"dur", trace_dur_us(tm.start, tm.end)},
                         {"args", args}});
    }
  }
}

void ChromeTrace::add_span(const std::string& process, const std::string& lane_name, std::int64_t lane,
                           const std::string& name, Tick start, Tick end) {
  if (start < 0 || end < start) return;
  auto it = std::find(extra_processes_.begin(), extra_processes_.end(), process);
  const int pid = num_gpus_ + static_cast<int>(it - extra_processes_.begin());
  if (it == extra_processes_.end()) {
    extra_processes_.push_back(process);
    events_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", process}}}});
    events_.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  }
  if (named_lanes_.insert({pid, lane}).second)
    events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", lane}, {"args", {{"name", lane_name}}}});
  events_.push_back({{"ph", "X"},
                     {"name", name},
                     {"cat", process},
                     {"pid", pid},
                     {"tid", lane},
                     {"ts", trace_us(start)},
                     {"dur", trace_dur_us(start, end)}});
}

void ChromeTrace::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write trace " + path);
  out << nlohmann::json{{"traceEvents", events_}, {"displayTimeUnit", "ns"}}.dump() << "\n";
  if (!out) throw std::runtime_error("cannot write trace " + path);
}

}  // namespace moesim
