#include "sim/analytic_network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace moesim {

namespace {
// Emptied completion batches kept for reuse: enough for the distinct completion ticks of a few
// groups in flight, few enough that their capacity stays small.
constexpr std::size_t kSpareBatches = 64;
}  // namespace

LinkId AnalyticNetwork::add_link(std::string name, double bandwidth_Bps, Tick latency) {
  if (!(bandwidth_Bps > 0.0)) throw std::invalid_argument("link '" + name + "' needs bandwidth > 0");
  if (latency < 0) throw std::invalid_argument("link '" + name + "' needs latency >= 0");
  links_.push_back(Link{std::move(name), bandwidth_Bps, latency, 0.0});
  bytes_per_tick_.push_back(bandwidth_Bps / static_cast<double>(kPsPerS));
  load_.push_back(0.0);
  drain_.push_back(0.0);
  return static_cast<LinkId>(links_.size() - 1);
}

FlowId AnalyticNetwork::start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done,
                                   HopLatency hop) {
  if (bytes < 0.0 || !std::isfinite(bytes)) throw std::invalid_argument("flow bytes must be >= 0");
  const FlowId id = next_id_++;
  ++active_;
  if (path.empty()) {
    // Local: nothing crosses a link. Complete in this tick, after the caller returns (as the
    // flow backend does, so callers see the same ordering).
    sim_.after(0, [this, cb = std::move(on_done)] {
      --active_;
      cb();
    }, EventPriority::kCompletion);
    return id;
  }
  Tick latency = 0;
  for (LinkId l : path) {
    assert(l < links_.size());
    if (hop == HopLatency::kPaid) latency += links_[l].latency;
  }
  group_.push_back(Pending{static_cast<std::uint32_t>(path_links_.size()), static_cast<std::uint32_t>(path.size()),
                           bytes, latency, std::move(on_done)});
  path_links_.insert(path_links_.end(), path.begin(), path.end());
  if (!price_pending_) {
    price_pending_ = true;
    // After every other event of this tick, so that all of the tick's starts are one group.
    sim_.after(0, [this] { price_group(); }, EventPriority::kReallocate);
  }
  return id;
}

void AnalyticNetwork::price_group() {
  price_pending_ = false;
  ++groups_priced_;
  // Link loads of the group. Link statistics are counted here, when the bytes are committed to
  // their links, rather than on arrival: nothing can cancel a flow, and the totals are the same.
  for (const Pending& f : group_) {
    if (f.bytes <= 0.0) continue;
    for (std::uint32_t k = f.first; k < f.first + f.count; ++k) {
      const LinkId l = path_links_[k];
      if (load_[l] == 0.0) touched_.push_back(l);
      load_[l] += f.bytes;
      links_[l].bytes_carried += f.bytes;
    }
  }
  // Each flow ends when its busiest link has drained the whole group's load on it.
  for (LinkId l : touched_) drain_[l] = load_[l] / bytes_per_tick_[l];
  const Tick now = sim_.now();
  for (Pending& f : group_) {
    Tick transfer = 0;
    if (f.bytes > 0.0) {
      double ticks = 0.0;
      for (std::uint32_t k = f.first; k < f.first + f.count; ++k) ticks = std::max(ticks, drain_[path_links_[k]]);
      // Rounded up, and at least one tick, as the flow backend rounds a transfer.
      transfer = std::max<Tick>(1, checked_ticks(ticks));
    }
    complete_at(checked_add(checked_add(now, f.latency), transfer), std::move(f.on_done));
  }
  for (LinkId l : touched_) load_[l] = 0.0;
  touched_.clear();
  group_.clear();
  path_links_.clear();
}

void AnalyticNetwork::complete_at(Tick at, DoneCallback cb) {
  if (!last_batch_ || last_at_ != at) {
    auto [it, fresh] = batches_.try_emplace(at);
    if (fresh) {
      if (!spare_.empty()) {
        it->second = std::move(spare_.back());
        spare_.pop_back();
      }
      sim_.at(at, [this, at] {
        // Moved out first: a callback may start flows that complete at this very tick (empty paths
        // are handled apart, so only a new batch could be created, never this one extended).
        auto node = batches_.extract(at);
        if (last_at_ == at) last_batch_ = nullptr;
        std::vector<DoneCallback> done = std::move(node.mapped());
        active_ -= done.size();
        for (auto& c : done) c();
        done.clear();
        if (spare_.size() < kSpareBatches) spare_.push_back(std::move(done));
      }, EventPriority::kCompletion);
    }
    last_at_ = at;
    last_batch_ = &it->second;
  }
  last_batch_->push_back(std::move(cb));
}

}  // namespace moesim
