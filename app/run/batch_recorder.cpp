#include "app/run/batch_recorder.hpp"
#include "hardware/phase.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace moesim {

void TrafficBytes::add(const Task& t, const Cluster& cluster) {
  if (t.kind == TaskKind::kCollective) {  // a GPU's sends, priced in closed form
    inter_node += t.bytes_across_nodes * t.repeat;
    intra_node += (t.bytes - t.bytes_across_nodes) * t.repeat;
    return;
  }
  if (t.kind != TaskKind::kTransfer || t.src == t.dst) return;
  const int G = cluster.num_gpus();
  const double bytes = t.bytes * t.repeat;  // a sampled layer's transfer stands for its block's
  if (t.src >= G || t.dst >= G) host_to_device += bytes;
  else if (cluster.node_of_endpoint(t.src) != cluster.node_of_endpoint(t.dst)) inter_node += bytes;
  else intra_node += bytes;
}

nlohmann::json TrafficBytes::to_json() const {
  return {{"intra_gpu", intra_gpu}, {"intra_node", intra_node}, {"inter_node", inter_node}, {"host_to_device", host_to_device}};
}

BatchRecorder::BatchRecorder(const Cluster& cluster, Tick start, TrafficBytes& bytes, bool layer_breakdown)
    : cluster_(cluster),
      bytes_(bytes),
      start_(start),
      end_(start),
      prev_(start),
      max_layer_end_(start),
      layer_breakdown_(layer_breakdown),
      gpu_sweep_(cluster.num_gpus(), start) {}

void BatchRecorder::reset(Tick start) {
  start_ = end_ = prev_ = max_layer_end_ = start;
  has_layers_ = false;
  closed_ = 0;
  open_.clear();
  cached_layer_ = -1;
  gpu_sweep_.reset(start);
  layer_ms_.clear();
  alltoall_ms_.clear();
  layer_parts_.clear();
  gpu_time_.clear();
}

BatchRecorder::OpenLayer& BatchRecorder::layer(int l) {
  if (l < closed_)
    throw std::logic_error("BatchRecorder: a task of layer " + std::to_string(l) + " after the layer was closed");
  while (static_cast<int>(open_.size()) <= l - closed_) {
    open_.emplace_back();
    open_.back().end = start_;
  }
  return open_[static_cast<std::size_t>(l - closed_)];
}

void BatchRecorder::add(const TaskGraph& plan, TaskId first, std::span<const TaskTiming> timing, Tick horizon) {
  for (std::size_t i = 0; i < timing.size(); ++i) {
    const Task& t = plan.task(first + static_cast<TaskId>(i));
    const TaskTiming& tm = timing[i];
    end_ = std::max(end_, tm.end);
    OpenLayer* l = nullptr;
    if (t.layer >= 0) {
      // Consecutive tasks mostly share a layer: its entry is found once for the run of them (a
      // deque keeps references to its other elements as it grows at the back).
      if (t.layer != cached_layer_) {
        cached_open_ = &layer(t.layer);
        cached_layer_ = t.layer;
      }
      l = cached_open_;
      has_layers_ = true;
      max_layer_end_ = std::max(max_layer_end_, tm.end);
      l->end = std::max(l->end, tm.end);
      if (t.kind == TaskKind::kCompute && t.phase == phase::kRouter) {
        l->moe = true;
        l->repeat = std::max<int>(l->repeat, t.repeat);
      }
      if (layer_breakdown_) l->sweep.add(t, tm);
    }
    if (t.kind == TaskKind::kTransfer || t.kind == TaskKind::kCollective) {
      bytes_.add(t, cluster_);
      if ((t.phase == phase::kDispatch || t.phase == phase::kCombine) && l) {
        const int k = t.phase == phase::kCombine ? 1 : 0;
        l->a2a_begin[k] = std::min(l->a2a_begin[k], tm.start);
        l->a2a_end[k] = std::max(l->a2a_end[k], tm.end);
      }
    }
    gpu_sweep_.add(t, tm);
  }
  gpu_sweep_.advance(horizon);
}

// A layer's window runs from the latest end of the layers before it to its own end: its latency,
// and the span its breakdown divides.
void BatchRecorder::close_layers(int layer) {
  cached_layer_ = -1;  // its entry may be closed below
  for (; closed_ < layer; ++closed_) {
    OpenLayer l;
    l.end = start_;
    if (!open_.empty()) {
      l = std::move(open_.front());
      open_.pop_front();
    }
    if (l.moe) {
      // A sampled layer stands for `repeat` layers run back to back: one layer's share.
      const double per = 1.0 / static_cast<double>(l.repeat);
      layer_ms_.push_back(ticks_to_ms(l.end - prev_) * per);
      double a2a = 0.0;
      for (int k = 0; k < 2; ++k)
        if (l.a2a_end[k] > 0 && l.a2a_begin[k] != kTickMax) a2a += ticks_to_ms(l.a2a_end[k] - l.a2a_begin[k]);
      alltoall_ms_.push_back(a2a * per);
      if (layer_breakdown_) layer_parts_.push_back(l.sweep.take(prev_, std::max(prev_, l.end)));
    }
    prev_ = std::max(prev_, l.end);
  }
}

void BatchRecorder::finish() {
  close_layers(closed_ + static_cast<int>(open_.size()));
  gpu_sweep_.finish_into(end_, gpu_time_);
}

}  // namespace moesim
