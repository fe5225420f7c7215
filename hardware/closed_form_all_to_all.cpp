#include "hardware/closed_form_all_to_all.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/invariants.hpp"

namespace moesim {

void ClosedFormAllToAll::start(const Cluster& c, const std::vector<int>& gpus) {
  const std::size_t n = gpus.size();
  c_ = &c;
  pairs_ = 0;
  hop_ = HopLatency::kPaid;
  mixed_hops_ = false;
  // The last all-to-all's loads are cleared before the vector is sized for this cluster's links.
  for (LinkId l : touched_) load_[l] = 0.0;
  touched_.clear();
  load_.resize(c.links().size(), 0.0);
  out_.assign(n, NodeEdge{});
  in_.assign(n, NodeEdge{});
  inside_.clear();
  inside_later_.clear();
  gpu_ = gpus;
  endpoint_.resize(n);
  node_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    endpoint_[i] = c.gpu_endpoint(gpus[i]);
    node_[i] = c.node_of_gpu(gpus[i]);
  }
  calls_.duration.assign(n, 0);
  calls_.sent.assign(n, 0.0);
  calls_.sent_across_nodes.assign(n, 0.0);
  calls_.received.assign(n, 0.0);
}

void ClosedFormAllToAll::add_inside(std::size_t i, std::size_t j, double b) {
  const std::vector<LinkId>* route = c_->route_parts(endpoint_[i], endpoint_[j]).inside;
  for (LinkId l : *route) add_load(l, b);
  inside_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), route});
}

double ClosedFormAllToAll::drain(LinkId l) const {
  return load_[l] / (c_->links()[l].bandwidth_Bps / static_cast<double>(kPsPerS));
}

const ClosedFormCalls& ClosedFormAllToAll::price(const std::vector<std::vector<double>>& bytes, bool transposed) {
  if (mixed_hops_) throw std::logic_error("closed-form all-to-all: its pairs disagree on paying their hops");
  // Pairs added by column that stay inside a node load their links now, in row order. They were
  // added column by column, so each source's pairs are already in destination order: a stable
  // counting sort by source puts them in row order.
  if (!inside_later_.empty()) {
    const std::size_t n = endpoint_.size();
    later_start_.assign(n + 1, 0);
    for (const LaterPair& q : inside_later_) ++later_start_[q.src + 1];
    for (std::size_t i = 0; i < n; ++i) later_start_[i + 1] += later_start_[i];
    later_sorted_.resize(inside_later_.size());
    for (const LaterPair& q : inside_later_) later_sorted_[later_start_[q.src]++] = q;
    for (const LaterPair& q : later_sorted_) add_inside(q.src, q.dst, q.b);
    inside_later_.clear();
  }
  const Cluster& c = *c_;
  const std::vector<Cluster::LinkInfo>& links = c.links();
  const std::size_t n = endpoint_.size();
  const bool hops = hop_ == HopLatency::kPaid;
  // A GPU's ways out of and into its node: its route to (from) a GPU of another node.
  const int other_node_gpu = c.num_nodes() > 1 ? c.spec().gpus_per_node : 0;  // a GPU of node 1
  const auto partner = [&](std::size_t i) { return c.gpu_endpoint(node_[i] == 0 ? other_node_gpu : 0); };
  for (std::size_t i = 0; i < n; ++i) {
    if (out_[i].bytes > 0.0) {
      const Cluster::RouteParts p = c.route_parts(endpoint_[i], partner(i));
      for (LinkId l : *p.head) add_load(l, out_[i].bytes);
      add_load(p.up, out_[i].bytes);
    }
    if (in_[i].bytes > 0.0) {
      const Cluster::RouteParts p = c.route_parts(partner(i), endpoint_[i]);
      add_load(p.down, in_[i].bytes);
      for (LinkId l : *p.tail) add_load(l, in_[i].bytes);
    }
  }
  // The ways' drain times and latencies, now that every link's load is known.
  const auto edge_of = [&](NodeEdge& e, LinkId first, const std::vector<LinkId>& rest) {
    double ticks = drain(first);
    Tick latency = links[first].latency;
    for (LinkId l : rest) {
      ticks = std::max(ticks, drain(l));
      latency += links[l].latency;
    }
    e.drain = std::max<Tick>(1, checked_ticks(ticks));
    e.latency = hops ? latency : 0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (out_[i].bytes > 0.0) {
      const Cluster::RouteParts p = c.route_parts(endpoint_[i], partner(i));
      edge_of(out_[i], p.up, *p.head);
    }
    if (in_[i].bytes > 0.0) {
      const Cluster::RouteParts p = c.route_parts(partner(i), endpoint_[i]);
      edge_of(in_[i], p.down, *p.tail);
    }
  }
  // Each pair's finish, and each call's end.
  std::vector<Tick>& end = calls_.duration;
  for (const InsidePair& q : inside_) {
    double ticks = 0.0;
    Tick latency = 0;
    for (LinkId l : *q.route) {
      ticks = std::max(ticks, drain(l));
      latency += links[l].latency;
    }
    const Tick finish = (hops ? latency : 0) + std::max<Tick>(1, checked_ticks(ticks));
    end[q.src] = std::max(end[q.src], finish);
    end[q.dst] = std::max(end[q.dst], finish);
  }
  // max(1, ceil(max(a, b))) is max(max(1, ceil a), max(1, ceil b)): a pair across nodes takes its
  // ends' rounded drains. The pass also counts the matrix's pairs, for the invariant below.
  std::size_t pairs = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::vector<double>& row = bytes[r];
    Tick end_r = end[r];
    if (!transposed) {  // row r: the pairs r → j
      const NodeEdge& out = out_[r];
      for (std::size_t j = 0; j < n; ++j) {
        if (row[j] <= 0.0 || r == j) continue;
        ++pairs;
        if (node_[r] == node_[j]) continue;
        const Tick finish = out.latency + in_[j].latency + std::max(out.drain, in_[j].drain);
        end_r = std::max(end_r, finish);
        end[j] = std::max(end[j], finish);
      }
    } else {  // row r of the transpose: the pairs i → r
      const NodeEdge& in = in_[r];
      for (std::size_t i = 0; i < n; ++i) {
        if (row[i] <= 0.0 || r == i) continue;
        ++pairs;
        if (node_[r] == node_[i]) continue;
        const Tick finish = out_[i].latency + in.latency + std::max(out_[i].drain, in.drain);
        end_r = std::max(end_r, finish);
        end[i] = std::max(end[i], finish);
      }
    }
    end[r] = end_r;
  }
  // all-to-all-balanced (core/invariants.hpp): every pair of the matrix off its diagonal was
  // added, and what the calls send is what they receive.
  double sent = 0.0, received = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sent += calls_.sent[i];
    received += calls_.received[i];
  }
  check_invariant(pairs == pairs_ && std::abs(sent - received) <= 1e-9 * sent, Invariant::kAllToAllBalanced, [&] {
    return "closed-form all-to-all of " + std::to_string(pairs) + " pairs, " + std::to_string(pairs_) +
           " added: the calls send " + std::to_string(sent) + " bytes and receive " + std::to_string(received);
  });
  return calls_;
}

std::vector<TaskId> ClosedFormAllToAll::plan(TaskGraph& g, const std::vector<std::vector<double>>& bytes, Phase phase,
                                             int layer, std::span<const TaskId> launched, bool transposed) {
  const std::size_t n = endpoint_.size();
  const ClosedFormCalls& calls = price(bytes, transposed);
  thread_local std::vector<TaskId> launches;
  launches.clear();
  for (std::size_t i = 0; i < n; ++i)
    if (calls.takes_part(i)) launches.push_back(launched[i]);
  const TaskId start = launches.empty() ? TaskGraph::kNoTask : g.join(launches, phase, layer);
  std::vector<TaskId> done(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!calls.takes_part(i)) {
      const TaskId dep[] = {launched[i]};
      done[i] = g.join(dep, phase, layer);
      continue;
    }
    const TaskId dep[] = {start};
    done[i] = g.collective(gpu_[i], calls.duration[i], calls.sent[i], calls.sent_across_nodes[i], phase, layer, dep);
  }
  return done;
}

}  // namespace moesim
