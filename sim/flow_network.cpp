#include "sim/flow_network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace moesim {

namespace {
std::uint64_t path_key(const std::vector<LinkId>& path, double bytes) {
  std::uint64_t h = std::hash<double>{}(bytes);
  for (LinkId l : path) h = (h ^ l) * 0x100000001b3ULL;
  return h;
}
}  // namespace

LinkId FlowNetwork::add_link(std::string name, double bandwidth_Bps, Tick latency) {
  if (!(bandwidth_Bps > 0.0)) throw std::invalid_argument("link '" + name + "' needs bandwidth > 0");
  if (latency < 0) throw std::invalid_argument("link '" + name + "' needs latency >= 0");
  links_.push_back(Link{std::move(name), bandwidth_Bps, latency, 0.0});
  bw_per_tick_.push_back(bandwidth_Bps / static_cast<double>(kPsPerS));
  link_log_.emplace_back();
  return static_cast<LinkId>(links_.size() - 1);
}

FlowId FlowNetwork::start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done,
                                   HopLatency hop) {
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
    if (hop == HopLatency::kPaid) latency += links_[l].latency;
  }
  // The flow waits for its hops in a reused slot, so the event holds two words (no allocation).
  std::uint32_t wait;
  if (!free_waiting_.empty()) {
    wait = free_waiting_.back();
    free_waiting_.pop_back();
  } else {
    wait = static_cast<std::uint32_t>(waiting_.size());
    waiting_.emplace_back();
  }
  Waiting& w = waiting_[wait];
  w.path.assign(path.begin(), path.end());
  w.bytes = bytes;
  w.member = Member{id, std::move(on_done)};
  sim_.after(latency, [this, wait] {
    Waiting& w = waiting_[wait];
    activate(w.path, w.bytes, std::move(w.member));  // starts no flow itself: waiting_ stays put
    w.member.on_done = nullptr;
    free_waiting_.push_back(wait);
  });
  return id;
}

double FlowNetwork::flow_rate_Bps(FlowId id) const {
  for (const auto& f : flows_) {
    if (!f.alive || f.round == kNoRound) continue;
    for (const auto& m : f.members)
      if (m.id == id) return f.rate * static_cast<double>(kPsPerS);
  }
  return 0.0;
}

void FlowNetwork::activate(const std::vector<LinkId>& path, double bytes, Member m) {
  if (bytes <= 0.0) {
    sim_.after(0, std::move(m.on_done), EventPriority::kCompletion);
    return;
  }
  ++active_members_;
  if (fresh_tick_ != sim_.now()) {
    forget_fresh();
    fresh_tick_ = sim_.now();
  }
  const std::uint64_t key = path_key(path, bytes);
  for (std::uint32_t s = fresh_head(key); s != kNoSlot; s = fresh_next_[s]) {
    Flow& f = flows_[s];
    if (f.bytes == bytes && f.path.equals(path)) {
      f.members.push_back(std::move(m));
      request_reallocate();
      return;
    }
  }
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    fresh_next_.push_back(kNoSlot);
  }
  Flow& f = flows_[slot];
  f.path.assign(path);
  f.members.clear();
  f.members.push_back(std::move(m));
  f.bytes = f.remaining = bytes;
  f.rate = 0.0;
  f.since = sim_.now();
  f.done_at = kTickMax;
  f.round = kNoRound;
  f.alive = true;
  std::uint32_t& head = fresh_head_ref(key);
  fresh_next_[slot] = head;
  head = slot;
  full_refill_ = true;  // a new flow can lower any round's level: fill from scratch
  request_reallocate();
}

// The table of fresh entries: open addressing by key, an entry live only under the current
// stamp, so forgetting a tick's burst is one increment (no walk, no allocation).
std::size_t FlowNetwork::fresh_index(std::uint64_t key) const {
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> 32) & (fresh_table_.size() - 1);
}

std::uint32_t FlowNetwork::fresh_head(std::uint64_t key) const {
  if (fresh_table_.empty()) return kNoSlot;
  for (std::size_t i = fresh_index(key);; i = (i + 1) & (fresh_table_.size() - 1)) {
    const FreshEntry& e = fresh_table_[i];
    if (e.stamp != fresh_stamp_) return kNoSlot;
    if (e.key == key) return e.head;
  }
}

std::uint32_t& FlowNetwork::fresh_head_ref(std::uint64_t key) {
  if (2 * (fresh_count_ + 1) > fresh_table_.size()) {
    // Grow: re-insert the live entries into a table twice the size.
    std::vector<FreshEntry> old(std::max<std::size_t>(64, 2 * fresh_table_.size()));
    old.swap(fresh_table_);
    for (const FreshEntry& e : old) {
      if (e.stamp != fresh_stamp_) continue;
      std::size_t i = fresh_index(e.key);
      while (fresh_table_[i].stamp == fresh_stamp_) i = (i + 1) & (fresh_table_.size() - 1);
      fresh_table_[i] = e;
    }
  }
  std::size_t i = fresh_index(key);
  for (; fresh_table_[i].stamp == fresh_stamp_; i = (i + 1) & (fresh_table_.size() - 1))
    if (fresh_table_[i].key == key) return fresh_table_[i].head;
  ++fresh_count_;
  fresh_table_[i] = FreshEntry{key, fresh_stamp_, kNoSlot};
  return fresh_table_[i].head;
}

void FlowNetwork::forget_fresh() {
  if (fresh_count_ == 0) return;
  ++fresh_stamp_;
  fresh_count_ = 0;
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

void FlowNetwork::reallocate() {
  ++reallocations_;
  ++generation_;
  forget_fresh();
  refill();
  // One event for the earliest completion.
  if (due_.empty()) return;
  const std::uint64_t gen = generation_;
  sim_.at(due_.top_tick(), [this, gen] { on_completion_check(gen); }, EventPriority::kCompletion);
}

void FlowNetwork::on_completion_check(std::uint64_t generation) {
  if (generation != generation_) return;  // superseded by a later reallocation
  // Everything due within the next tick is complete: less than one tick of bytes is left. With a
  // completion window, everything due within the window (an approximation: see the header).
  std::vector<std::uint32_t>& finished = finished_;
  finished.clear();
  const Tick now = sim_.now();
  const Tick until = now > kTickMax - completion_window_ ? kTickMax : now + completion_window_;
  while (!due_.empty() && due_.top_tick() <= until) {
    finished.push_back(due_.top_slot());
    due_.pop();
  }
  // Callbacks in activation order, as the flows' ids give it.
  std::sort(finished.begin(), finished.end(),
            [&](std::uint32_t a, std::uint32_t b) { return flows_[a].members[0].id < flows_[b].members[0].id; });
  // The callbacks may start flows (never a completion check): their list is the reused scratch's,
  // taken out while they run.
  std::vector<DoneCallback> done;
  done.swap(done_scratch_);
  for (std::uint32_t s : finished) {
    Flow& f = flows_[s];
    for (LinkId l : f.path) {
      for (std::size_t k = 0; k < f.members.size(); ++k) links_[l].bytes_carried += f.bytes;
      removed_links_.push_back(l);
    }
    restart_round_ = std::min(restart_round_, f.round);
    f.alive = false;
    active_members_ -= f.members.size();
    for (auto& m : f.members) done.push_back(std::move(m.on_done));
    f.members.clear();
    dead_slots_.push_back(s);
  }
  request_reallocate();
  for (auto& cb : done) cb();
  done.clear();
  done_scratch_.swap(done);
}

}  // namespace moesim
