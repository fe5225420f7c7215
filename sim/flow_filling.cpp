// Progressive filling for FlowNetwork, incremental and exact.
//
// Progressive filling raises every unfrozen flow's rate together; in each round the link with the
// smallest remaining capacity per unfrozen flow saturates, and its flows freeze at that share.
// Which link saturates in a round, and the capacity every link has left after it, depend only on
// the flows frozen in earlier rounds. So when flows end, the rounds before the earliest round that
// froze one of them are exactly what a filling from scratch would do again: their bottleneck links
// carry none of the ended flows, and every other link's share only grew. Those rounds are kept;
// each link's remaining capacity after them comes back from its undo log (one entry per round
// that changed it), and only the later rounds are redone. Ties between equal shares go to the
// lower link id, a rule that does not depend on which flows are active, so a partial refill picks
// what a full one would. A new flow can lower any round's level, so flows starting trigger a
// filling from scratch (all-to-alls start their flows together: one per collective).
//
// In a skewed all-to-all the flows that finish first are the ones frozen late (high rates, small
// sizes); the DeepSeek-V3 64-GPU scale scenario refills ~4% of the active flows per completion.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "sim/flow_network.hpp"

namespace moesim {

void FlowNetwork::refill() {
  std::uint32_t from;
  if (full_refill_)
    from = 0;
  else if (restart_round_ != kNoRound)
    from = restart_round_;
  else
    return;
  const std::size_t n_links = links_.size();
  if (cap_left_.size() < n_links) {
    cap_left_.resize(n_links);
    cand_pos_.resize(n_links);
    unfrozen_.resize(n_links);
    link_stamp_.resize(n_links);
    link_start_.resize(n_links);
    link_fill_.resize(n_links);
  }
  collect_refill_set(from);
  restore_links(from);
  fill_rounds(from);
  set_rates();
  refilled_ += refill_set_.size();
  full_refill_ = false;
  restart_round_ = kNoRound;
  removed_links_.clear();
  free_slots_.insert(free_slots_.end(), dead_slots_.begin(), dead_slots_.end());
  dead_slots_.clear();
}

void FlowNetwork::collect_refill_set(std::uint32_t from) {
  refill_set_.clear();
  if (from == 0 && full_refill_) {
    for (std::uint32_t s = 0; s < flows_.size(); ++s)
      if (flows_[s].alive) refill_set_.push_back(s);
  } else {
    const auto rounds = static_cast<std::uint32_t>(round_start_.size()) - 1;
    for (std::uint32_t k = round_start_[std::min(from, rounds)]; k < round_flows_.size(); ++k) {
      const std::uint32_t s = round_flows_[k];
      if (flows_[s].alive) refill_set_.push_back(s);
    }
  }
  // Forget the rounds being redone.
  if (round_start_.empty()) round_start_.push_back(0);
  const std::uint32_t keep = std::min<std::uint32_t>(from, static_cast<std::uint32_t>(round_start_.size()) - 1);
  round_flows_.resize(round_start_[keep]);
  round_start_.resize(keep + 1);
}

void FlowNetwork::restore_links(std::uint32_t from) {
  ++stamp_;
  touched_.clear();
  // First sight of a link: drop its log's entries from the redone rounds, take its capacity left
  // after the kept ones.
  auto touch = [&](LinkId l) {
    if (link_stamp_[l] == stamp_) return;
    link_stamp_[l] = stamp_;
    touched_.push_back(l);
    auto& log = link_log_[l];
    while (!log.empty() && log.back().round >= from) log.pop_back();
    cap_left_[l] = log.empty() ? bw_per_tick_[l] : log.back().cap_left;
    unfrozen_[l] = 0;
    link_fill_[l] = 0;
  };
  for (std::uint32_t s : refill_set_) {
    const Flow& f = flows_[s];
    const auto members = static_cast<std::uint32_t>(f.members.size());
    for (LinkId l : f.path) {
      touch(l);
      unfrozen_[l] += members;
      ++link_fill_[l];
    }
  }
  for (LinkId l : removed_links_) touch(l);
  // Flows per link (CSR over the refill set), so a round visits only its bottleneck's flows.
  std::uint32_t pos = 0;
  candidates_.clear();
  cand_share_.clear();
  dead_candidates_ = 0;
  for (LinkId l : touched_) {
    link_start_[l] = pos;
    pos += link_fill_[l];
    link_fill_[l] = link_start_[l];
    if (unfrozen_[l] > 0) {
      cand_pos_[l] = static_cast<std::uint32_t>(candidates_.size());
      candidates_.push_back(l);
      cand_share_.push_back(cap_left_[l] / static_cast<double>(unfrozen_[l]));
    }
  }
  link_flows_.resize(pos);
  for (std::uint32_t k = 0; k < refill_set_.size(); ++k)
    for (LinkId l : flows_[refill_set_[k]].path) link_flows_[link_fill_[l]++] = k;
}

void FlowNetwork::fill_rounds(std::uint32_t from) {
  frozen_.assign(refill_set_.size(), 0);
  new_rate_.resize(refill_set_.size());
  std::size_t left = refill_set_.size();
  std::uint32_t round = from;
  while (left > 0) {
    // The bottleneck: smallest share per unfrozen member; ties to the lower link id. The shares
    // sit in one dense array (a link without unfrozen flows holds +inf), so the scan is a tight
    // loop over doubles; holes are squeezed out once they are half of it. (A heap of the shares,
    // eager or lazy, was measured slower: a round changes about as many shares as there are
    // candidates, and they grow together, so the smallest keys keep going stale.)
    if (dead_candidates_ > 16 && 2 * dead_candidates_ > cand_share_.size()) compact_candidates();
    LinkId bottleneck = std::numeric_limits<LinkId>::max();
    double share = std::numeric_limits<double>::infinity();
    const double* shares = cand_share_.data();
    for (std::size_t i = 0, n = cand_share_.size(); i < n; ++i) {
      const double s = shares[i];
      if (s <= share && (s < share || candidates_[i] < bottleneck)) {
        share = s;
        bottleneck = candidates_[i];
      }
    }
    assert(std::isfinite(share));
    ++stamp_;
    round_links_.clear();
    for (std::uint32_t k = link_start_[bottleneck]; k < link_fill_[bottleneck]; ++k) {
      const std::uint32_t i = link_flows_[k];
      if (frozen_[i]) continue;
      frozen_[i] = 1;
      --left;
      const std::uint32_t slot = refill_set_[i];
      Flow& f = flows_[slot];
      new_rate_[i] = share;
      f.round = round;
      round_flows_.push_back(slot);
      const auto members = static_cast<std::uint32_t>(f.members.size());
      for (LinkId l : f.path) {
        // Member by member, as separate flows would: coalescing changes no arithmetic.
        double cap = cap_left_[l];
        for (std::uint32_t m = 0; m < members; ++m) cap = std::max(0.0, cap - share);
        cap_left_[l] = cap;
        unfrozen_[l] -= members;
        if (link_stamp_[l] != stamp_) {
          link_stamp_[l] = stamp_;
          round_links_.push_back(l);
        }
      }
    }
    for (LinkId l : round_links_) {
      link_log_[l].push_back(LogEntry{round, cap_left_[l]});
      double& cs = cand_share_[cand_pos_[l]];
      if (unfrozen_[l] > 0) {
        cs = cap_left_[l] / static_cast<double>(unfrozen_[l]);
      } else if (cs != std::numeric_limits<double>::infinity()) {
        cs = std::numeric_limits<double>::infinity();  // never a candidate again in this filling
        ++dead_candidates_;
      }
    }
    round_start_.push_back(static_cast<std::uint32_t>(round_flows_.size()));
    ++round;
  }
}

void FlowNetwork::compact_candidates() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < cand_share_.size(); ++i) {
    if (cand_share_[i] == std::numeric_limits<double>::infinity()) continue;
    cand_share_[kept] = cand_share_[i];
    candidates_[kept] = candidates_[i];
    cand_pos_[candidates_[kept]] = static_cast<std::uint32_t>(kept);
    ++kept;
  }
  cand_share_.resize(kept);
  candidates_.resize(kept);
  dead_candidates_ = 0;
}

void FlowNetwork::set_rates() {
  const Tick now = sim_.now();
  for (std::uint32_t k = 0; k < refill_set_.size(); ++k) {
    const std::uint32_t slot = refill_set_[k];
    Flow& f = flows_[slot];
    // An unchanged rate keeps its completion tick (and its entry in the due heap).
    if (new_rate_[k] == f.rate) continue;
    if (f.rate > 0.0) f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.since));
    f.since = now;
    f.rate = new_rate_[k];
    const double ticks = f.remaining / f.rate;
    f.done_at = checked_add(now, std::max<Tick>(1, checked_ticks(ticks)));
    due_.set(slot, f.done_at);
  }
}

}  // namespace moesim
