#pragma once
// An all-to-all priced in closed form when the plan is built (hardware.all_to_all_model
// closed-form), an approximation for runs too large to time every pair as a transfer.
//
// Model. The calls start together, when the last GPU taking part has launched (a barrier: a GPU
// receiving from every other cannot finish before they have all started sending anyway). The
// all-to-all's pairs are then priced as the analytic backend prices one group of flows
// (sim/analytic_network.hpp), on an otherwise idle network:
//   load_l    = sum over the pairs crossing link l of their bytes x wire scale
//   finish_ij = latency_ij (unless NCCL's launch paid the hops) + max(1 tick, ceil(max over the
//               pair's links l of load_l / bandwidth_l))
//   call_i    = max over the pairs GPU i sends or receives of finish_ij
// So against the analytic backend it is exact when every GPU launches at the same tick and no
// other transfer starts in that tick (the unit test checks this); otherwise its calls start at
// the latest launch instead of each GPU's own, and its links are shared with nothing else
// (the flow backend's max-min sharing with overlapping traffic is not modelled).
//
// Cost. The pairs are added as add_all_to_all prices them, each adding its bytes to its links: a
// pair between nodes adds to its source's share leaving the node and its destination's share
// entering it (a route between nodes is head(src) + up(src) + down(dst) + tail(dst),
// Cluster::RouteParts), so only pairs inside a node walk their route. One more pass over the
// matrix takes each pair's finish from its ends' drain times. The plan gets one task per GPU
// instead of one per pair (10^6 at 1,024 GPUs).
#include <cstdint>
#include <span>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/collectives.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// Each GPU's part of a closed-form all-to-all: how long its call lasts from the common start,
/// and what it sends (of which across nodes). A GPU that neither sends nor receives has no part.
struct ClosedFormCalls {
  std::vector<Tick> duration;
  std::vector<double> sent, sent_across_nodes, received;
  bool takes_part(std::size_t i) const { return sent[i] > 0.0 || received[i] > 0.0; }
};

/// One all-to-all at a time: start(), add() every pair with bytes, then price() or plan(). Its
/// storage is kept from one all-to-all to the next.
class ClosedFormAllToAll {
 public:
  /// Starts an all-to-all over `gpus` of `c` (which must outlive the pricing).
  void start(const Cluster& c, const std::vector<int>& gpus);
  /// Pair (i, j) (indices into gpus, i != j) sends `bytes` > 0, priced by `price` (its wire scale
  /// and whether its flow pays its route's hops; every pair of an all-to-all must agree on that).
  void add(std::size_t i, std::size_t j, double bytes, const P2pPricing& price) {
    // The bytes a flow carries at line rate, as the plan executor starts it: a task's wire scale
    // is a float.
    const double b = bytes * static_cast<double>(static_cast<float>(price.wire_scale));
    if (pairs_ == 0) hop_ = price.hop;
    mixed_hops_ |= price.hop != hop_;
    ++pairs_;
    calls_.sent[i] += bytes;
    calls_.received[j] += bytes;
    if (node_[i] == node_[j]) {
      add_inside(i, j, b);
    } else {
      calls_.sent_across_nodes[i] += bytes;
      out_[i].bytes += b;
      in_[j].bytes += b;
    }
  }
  /// add() for every pair of row i of the matrix with bytes (j != i, row[j] > 0), in column
  /// order, each priced by price_of(j) (a const P2pPricing&). What only row i changes is summed in
  /// registers: at 1,024 GPUs a pair at a time through add() re-read and re-wrote them 10^6 times.
  /// Adds exactly what add() would, in the same order.
  template <typename PriceOf>
  void add_row(std::size_t i, const std::vector<double>& row, PriceOf&& price_of) {
    double sent = calls_.sent[i], across = calls_.sent_across_nodes[i], out = out_[i].bytes;
    const int node = node_[i];
    std::size_t pairs = 0;
    bool mixed = false;
    HopLatency hop = hop_;
    for (std::size_t j = 0; j < row.size(); ++j) {
      const double bytes = row[j];
      if (j == i || bytes <= 0.0) continue;
      const P2pPricing& price = price_of(j);
      const double b = bytes * static_cast<double>(static_cast<float>(price.wire_scale));
      if (pairs_ + pairs == 0) hop = price.hop;
      mixed |= price.hop != hop;
      ++pairs;
      sent += bytes;
      calls_.received[j] += bytes;
      if (node_[j] == node) {
        add_inside(i, j, b);
      } else {
        across += bytes;
        out += b;
        in_[j].bytes += b;
      }
    }
    calls_.sent[i] = sent;
    calls_.sent_across_nodes[i] = across;
    out_[i].bytes = out;
    pairs_ += pairs;
    hop_ = hop;
    mixed_hops_ |= mixed;
  }
  /// The same for every pair (i, j) of column j of the matrix, read from its transpose: `row` is
  /// row j of the transpose (row[i]: the bytes i sends j), i in order, each priced by
  /// price_of(i). An all-to-all is added by rows or by columns, not both. Column j's own sums
  /// are kept in registers, and the pairs inside a node wait for price(), which adds them in row
  /// order: every sum is then taken in the order add_row() takes it, bit for bit.
  template <typename PriceOf>
  void add_column(std::size_t j, const std::vector<double>& row, PriceOf&& price_of) {
    double received = calls_.received[j], in = in_[j].bytes;
    const int node = node_[j];
    std::size_t pairs = 0;
    bool mixed = false;
    HopLatency hop = hop_;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const double bytes = row[i];
      if (i == j || bytes <= 0.0) continue;
      const P2pPricing& price = price_of(i);
      const double b = bytes * static_cast<double>(static_cast<float>(price.wire_scale));
      if (pairs_ + pairs == 0) hop = price.hop;
      mixed |= price.hop != hop;
      ++pairs;
      calls_.sent[i] += bytes;
      received += bytes;
      if (node_[i] == node) {
        inside_later_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), b});
      } else {
        calls_.sent_across_nodes[i] += bytes;
        out_[i].bytes += b;
        in += b;
      }
    }
    calls_.received[j] = received;
    in_[j].bytes = in;
    pairs_ += pairs;
    hop_ = hop;
    mixed_hops_ |= mixed;
  }
  /// The calls of the pairs added; `bytes` is the matrix they came from (read again for the pairs
  /// between nodes). The reference stays valid until the next start().
  /// `transposed`: the matrix is given by its transpose, as add_column() reads it.
  const ClosedFormCalls& price(const std::vector<std::vector<double>>& bytes, bool transposed = false);
  /// Prices the all-to-all and adds it to the plan: a barrier on the launches of the GPUs taking
  /// part, then one TaskKind::kCollective task per such GPU; a GPU without a part ends at its own
  /// launch. Returns, per GPU, the task where its call returns (as add_all_to_all does).
  std::vector<TaskId> plan(TaskGraph& g, const std::vector<std::vector<double>>& bytes, Phase phase, int layer,
                           std::span<const TaskId> launched, bool transposed = false);

 private:
  /// What a GPU's traffic between nodes meets: the links its route takes out of its node (head
  /// and up, shared by every pair it sends across) or into it (down and tail).
  struct NodeEdge {
    double bytes = 0.0;  ///< bytes x wire scale of the GPU's pairs across nodes, this direction
    Tick drain = 0;      ///< max(1, the busiest of these links' drain ticks, rounded up)
    Tick latency = 0;    ///< the links' hop latencies
  };
  /// A pair inside a node: its route, walked again once the loads are known.
  struct InsidePair {
    std::uint32_t src, dst;
    const std::vector<LinkId>* route;
  };
  /// A pair inside a node: walks its route (kept out of line, so that add() stays small enough to
  /// inline into add_all_to_all's loop over 10^6 pairs, most of them between nodes).
  void add_inside(std::size_t i, std::size_t j, double b);
  void add_load(LinkId l, double b) {
    if (load_[l] == 0.0) touched_.push_back(l);
    load_[l] += b;
  }
  double drain(LinkId l) const;

  const Cluster* c_ = nullptr;
  std::size_t pairs_ = 0;
  HopLatency hop_ = HopLatency::kPaid;
  bool mixed_hops_ = false;
  ClosedFormCalls calls_;
  std::vector<double> load_;     ///< per link: bytes x wire scale of the all-to-all, 0 between calls
  std::vector<LinkId> touched_;  ///< links with a load
  std::vector<NodeEdge> out_, in_;
  std::vector<InsidePair> inside_;
  /// add_column()'s pairs inside a node, added to their links by price() in row order.
  struct LaterPair {
    std::uint32_t src, dst;
    double b;
  };
  std::vector<LaterPair> inside_later_;
  std::vector<LaterPair> later_sorted_;    ///< price()'s row-ordered copy of inside_later_
  std::vector<std::size_t> later_start_;  ///< price()'s counting sort: first slot per source
  std::vector<int> gpu_, endpoint_, node_;
};

}  // namespace moesim
