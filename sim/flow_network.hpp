#pragma once
// Flow-level network model: a transfer is a flow along a fixed path of directed links; all active
// flows share every link by max-min fairness (progressive filling), recomputed whenever a flow
// starts or ends. Each flow first waits the sum of its hops' latencies, then transfers.
// A hot receiver's ingress link, a shared PCIe uplink or a NIC becomes the bottleneck because of
// this sharing, not because of a formula.
//
// Recomputation is incremental and exact (sim/flow_filling.cpp): progressive filling freezes
// flows round by round, and a flow that ends only changes the rounds from the one that froze it
// onwards, so only those rounds are redone, from a per-link undo log of remaining capacity. The
// rates are those a filling from scratch would give, bit for bit.
//
// Completion window (hardware.flow_completion_window_us, an approximation off by default): when
// the earliest flow completes, every flow due within the window completes with it, and the rates
// are recomputed once for all of them. A skewed all-to-all's flows finish at thousands of distinct
// ticks, each a recomputation; a window of a microsecond batches them, and each batched flow ends
// less than a window early (its last bytes count as delivered). Exact is a window of one tick:
// a flow due within the next tick has less than a tick of bytes left.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/due_heap.hpp"
#include "sim/network_backend.hpp"
#include "sim/simulator.hpp"

namespace moesim {

/// Shares link bandwidth between concurrent flows (max-min fair) and times their completion:
/// the `flow` network backend.
class FlowNetwork final : public NetworkBackend {
 public:
  /// `completion_window` ticks (>= 1; 1 is exact): see the file comment.
  explicit FlowNetwork(Simulator& sim, Tick completion_window = 1)
      : sim_(sim), completion_window_(std::max<Tick>(1, completion_window)) {}

  LinkId add_link(std::string name, double bandwidth_Bps, Tick latency) override;
  const Link& link(LinkId id) const override { return links_[id]; }
  std::size_t link_count() const override { return links_.size(); }

  /// Flows that activate at the same tick on the same path with the same bytes are coalesced
  /// into one entry of several members: they get equal rates and finish at the same tick, so
  /// this is exact (the filling subtracts each member's share as it would for separate flows).
  using NetworkBackend::start_flow;
  FlowId start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done, HopLatency hop) override;

  /// Current rate of an active flow in bytes/s (0 while in its latency phase or unknown).
  double flow_rate_Bps(FlowId id) const;
  std::size_t active_flows() const override { return active_members_; }
  /// Number of times rates were recomputed (for benchmarks).
  std::uint64_t reallocations() const { return reallocations_; }
  /// Flow entries whose rate was recomputed, summed over all recomputations (for benchmarks:
  /// a filling from scratch every time would give reallocations() x active entries).
  std::uint64_t refilled_flows() const { return refilled_; }

 private:
  static constexpr std::uint32_t kNoRound = 0xffffffffu;
  struct Member {
    FlowId id;
    DoneCallback on_done;
  };
  /// A flow's route: up to 8 links inline (every preset's routes are shorter), so a refill
  /// walking thousands of flows does not chase a heap pointer per flow; longer ones on the heap.
  class Path {
   public:
    static constexpr std::size_t kInline = 8;
    void assign(const std::vector<LinkId>& p) {
      n_ = static_cast<std::uint32_t>(p.size());
      if (n_ <= kInline)
        std::copy(p.begin(), p.end(), inline_.begin());
      else
        heap_ = p;
    }
    const LinkId* begin() const { return n_ <= kInline ? inline_.data() : heap_.data(); }
    const LinkId* end() const { return begin() + n_; }
    bool equals(const std::vector<LinkId>& p) const {
      return p.size() == n_ && std::equal(p.begin(), p.end(), begin());
    }

   private:
    std::uint32_t n_ = 0;
    std::array<LinkId, kInline> inline_{};
    std::vector<LinkId> heap_;
  };
  /// One active entry: a flow, or several coalesced ones.
  struct Flow {
    Path path;
    std::vector<Member> members;
    double bytes = 0.0;      ///< per member
    double remaining = 0.0;  ///< bytes per member left at `since`
    double rate = 0.0;       ///< bytes per tick per member
    Tick since = 0;
    Tick done_at = kTickMax;
    std::uint32_t round = kNoRound;  ///< filling round that froze it (kNoRound: not yet filled)
    bool alive = false;
  };
  struct LogEntry {
    std::uint32_t round;
    double cap_left;  ///< bytes per tick left on the link after that round
  };

  /// A flow in its latency phase: what activate() will take.
  struct Waiting {
    std::vector<LinkId> path;
    double bytes = 0.0;
    Member member;
  };
  void activate(const std::vector<LinkId>& path, double bytes, Member m);
  void request_reallocate();
  void reallocate();
  void on_completion_check(std::uint64_t generation);
  // Progressive filling (sim/flow_filling.cpp).
  void refill();
  void collect_refill_set(std::uint32_t from_round);
  void restore_links(std::uint32_t from_round);
  void fill_rounds(std::uint32_t from_round);
  void compact_candidates();
  void set_rates();

  Simulator& sim_;
  Tick completion_window_;  ///< flows due within this of the earliest completion finish with it
  std::vector<Link> links_;
  std::vector<double> bw_per_tick_;  ///< link bandwidth in bytes per tick
  std::vector<Flow> flows_;          ///< slots; dead ones are reused
  std::vector<std::uint32_t> free_slots_, dead_slots_;
  std::size_t active_members_ = 0;
  FlowId next_id_ = 0;
  bool reallocate_pending_ = false;
  std::uint64_t generation_ = 0;
  std::uint64_t reallocations_ = 0, refilled_ = 0;
  DueHeap due_;  ///< completion tick per active slot
  std::vector<Waiting> waiting_;  ///< slots; free ones are reused
  std::vector<std::uint32_t> free_waiting_;
  std::vector<std::uint32_t> finished_;   ///< on_completion_check's scratch
  std::vector<DoneCallback> done_scratch_;

  // Coalescing: entries activated at this tick and not yet filled, by (path, bytes): a table
  // from the key to the first such slot, the others chained through fresh_next_.
  static constexpr std::uint32_t kNoSlot = 0xffffffffu;
  struct FreshEntry {
    std::uint64_t key = 0;
    std::uint64_t stamp = 0;  ///< live when equal to fresh_stamp_
    std::uint32_t head = kNoSlot;
  };
  std::size_t fresh_index(std::uint64_t key) const;
  std::uint32_t fresh_head(std::uint64_t key) const;
  std::uint32_t& fresh_head_ref(std::uint64_t key);  ///< inserts an empty chain when missing
  void forget_fresh();
  std::vector<FreshEntry> fresh_table_;
  std::vector<std::uint32_t> fresh_next_;  ///< per slot: the next fresh slot of the same key
  std::uint64_t fresh_stamp_ = 1;
  std::size_t fresh_count_ = 0;
  Tick fresh_tick_ = -1;

  // Filling state. Rounds: level and frozen flow slots (flat, with offsets).
  bool full_refill_ = false;
  std::uint32_t restart_round_ = kNoRound;  ///< earliest round a removed flow was frozen in
  std::vector<std::uint32_t> round_start_, round_flows_;
  std::vector<std::vector<LogEntry>> link_log_;  ///< per link, undo log of cap_left by round
  std::vector<LinkId> removed_links_;            ///< links of flows removed since the last fill
  // Scratch, indexed by link or slot.
  std::vector<double> cap_left_;
  // The bottleneck candidates: links with unfrozen flows, their shares (cap_left_ / unfrozen_,
  // kept current; +inf once a link has none) in a dense array, and each link's position in it.
  std::vector<double> cand_share_;
  std::size_t dead_candidates_ = 0;
  std::vector<std::uint32_t> cand_pos_;
  std::vector<std::uint32_t> unfrozen_, link_stamp_, link_start_, link_fill_, link_flows_;
  std::uint32_t stamp_ = 0;
  std::vector<LinkId> touched_, candidates_, round_links_;
  std::vector<std::uint32_t> refill_set_;
  std::vector<char> frozen_;
  std::vector<double> new_rate_;
};

}  // namespace moesim
