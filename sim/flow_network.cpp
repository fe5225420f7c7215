#include "sim/flow_network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace moesim {

namespace {
// A flow is complete when less than this fraction of its bytes (or of one byte) is left:
// rates are doubles, so exact zero is not reached reliably.
constexpr double kRelativeEpsilon = 1e-9;
}  // namespace

LinkId FlowNetwork::add_link(std::string name, double bandwidth_Bps, Tick latency) {
  if (!(bandwidth_Bps > 0.0)) throw std::invalid_argument("link '" + name + "' needs bandwidth > 0");
  if (latency < 0) throw std::invalid_argument("link '" + name + "' needs latency >= 0");
  links_.push_back(Link{std::move(name), bandwidth_Bps, latency, 0.0});
  return static_cast<LinkId>(links_.size() - 1);
}

FlowId FlowNetwork::start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done) {
  if (bytes < 0.0 || !std::isfinite(bytes)) throw std::invalid_argument("flow bytes must be >= 0");
  const FlowId id = next_id_++;
  if (path.empty()) {
    // Local: nothing crosses a link. Complete in this tick, after the caller returns.
    sim_.after(0, std::move(on_done), EventPriority::kCompletion);
    return id;
  }
  Tick latency = 0;
  for (LinkId l : path) {
    assert(l < links_.size());
    latency += links_[l].latency;
  }
  Flow f{id, path, bytes, bytes, 0.0, std::move(on_done)};
  sim_.after(latency, [this, f = std::move(f)]() mutable { activate(std::move(f)); });
  return id;
}

double FlowNetwork::flow_rate_Bps(FlowId id) const {
  for (const auto& f : active_)
    if (f.id == id) return f.rate * static_cast<double>(kPsPerS);
  return 0.0;
}

void FlowNetwork::activate(Flow flow) {
  advance_to_now();
  if (flow.bytes <= 0.0) {
    sim_.after(0, std::move(flow.on_done), EventPriority::kCompletion);
    return;
  }
  active_.push_back(std::move(flow));
  request_reallocate();
}

void FlowNetwork::request_reallocate() {
  if (reallocate_pending_) return;
  reallocate_pending_ = true;
  // After every other event of this tick, so simultaneous starts and ends cost one recomputation.
  sim_.after(0, [this] {
    reallocate_pending_ = false;
    reallocate();
  }, EventPriority::kReallocate);
}

void FlowNetwork::advance_to_now() {
  const Tick now = sim_.now();
  const double dt = static_cast<double>(now - last_update_);
  if (dt > 0.0) {
    for (auto& f : active_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
  }
  last_update_ = now;
}

void FlowNetwork::reallocate() {
  advance_to_now();
  ++reallocations_;
  ++generation_;
  if (active_.empty()) return;

  // Progressive filling: repeatedly find the link whose remaining capacity per unfrozen flow is
  // smallest, give that share to all its unfrozen flows, and remove them from the problem.
  // Flows are indexed by the links they cross (CSR, flows in active order), so a round visits
  // only the bottleneck's flows; the arithmetic and its order are those of a full scan.
  cap_left_.assign(links_.size(), 0.0);
  unfrozen_.assign(links_.size(), 0);
  std::vector<LinkId> touched;
  for (const auto& f : active_) {
    for (LinkId l : f.path) {
      if (unfrozen_[l]++ == 0) {
        cap_left_[l] = links_[l].bandwidth_Bps / static_cast<double>(kPsPerS);
        touched.push_back(l);
      }
    }
  }
  link_start_.assign(links_.size() + 1, 0);
  for (LinkId l : touched) link_start_[l + 1] = unfrozen_[l];
  for (std::size_t l = 0; l < links_.size(); ++l) link_start_[l + 1] += link_start_[l];
  link_flows_.resize(link_start_.back());
  link_fill_.assign(link_start_.begin(), link_start_.end() - 1);
  for (std::uint32_t i = 0; i < active_.size(); ++i)
    for (LinkId l : active_[i].path) link_flows_[link_fill_[l]++] = i;
  std::vector<char> frozen(active_.size(), 0);
  std::size_t left = active_.size();
  while (left > 0) {
    LinkId bottleneck = 0;
    double share = std::numeric_limits<double>::infinity();
    for (LinkId l : touched) {
      if (unfrozen_[l] == 0) continue;
      const double s = cap_left_[l] / static_cast<double>(unfrozen_[l]);
      if (s < share) {
        share = s;
        bottleneck = l;
      }
    }
    assert(std::isfinite(share));
    for (std::uint32_t k = link_start_[bottleneck]; k < link_start_[bottleneck + 1]; ++k) {
      const std::uint32_t i = link_flows_[k];
      if (frozen[i]) continue;
      auto& f = active_[i];
      f.rate = share;
      frozen[i] = 1;
      --left;
      for (LinkId l : f.path) {
        cap_left_[l] = std::max(0.0, cap_left_[l] - share);
        --unfrozen_[l];
      }
    }
  }

  // One event for the earliest completion; later ones are rescheduled by the next reallocation.
  Tick earliest = kTickMax;
  for (const auto& f : active_) {
    const double ticks = f.remaining / f.rate;
    const Tick t = sim_.now() + std::max<Tick>(1, static_cast<Tick>(std::ceil(ticks)));
    earliest = std::min(earliest, t);
  }
  const std::uint64_t gen = generation_;
  sim_.at(earliest, [this, gen] { on_completion_check(gen); }, EventPriority::kCompletion);
}

void FlowNetwork::on_completion_check(std::uint64_t generation) {
  if (generation != generation_) return;  // superseded by a later reallocation
  advance_to_now();
  std::vector<DoneCallback> done;
  auto finished = [](const Flow& f) {
    return f.remaining <= std::max(1e-6, f.bytes * kRelativeEpsilon) || f.remaining <= f.rate;
  };
  for (auto& f : active_) {
    if (!finished(f)) continue;
    for (LinkId l : f.path) links_[l].bytes_carried += f.bytes;
    done.push_back(std::move(f.on_done));
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), finished), active_.end());
  request_reallocate();
  for (auto& cb : done) cb();
}

}  // namespace moesim
