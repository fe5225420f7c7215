#include "hardware/cluster_run.hpp"
#include "hardware/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/invariants.hpp"
#include "hardware/closed_form_all_to_all.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/link_loads.hpp"
#include "hardware/nccl_tuning.hpp"
#include "sim/network_backend.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kAllToAll: return "alltoall";
    case CollectiveKind::kSendRecv: return "sendrecv";
  }
  return "?";
}

const char* collective_calibration_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kSendRecv: return "send_recv";
  }
  return "?";
}

bool parse_collective(const std::string& s, CollectiveKind& out) {
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kAllToAll,
                 CollectiveKind::kSendRecv}) {
    if (s == collective_name(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

std::string custom_all_reduce_name(const std::string& engine) { return "custom_all_reduce." + engine; }

const CollectiveCalibration* collective_calibration(const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus) {
  if (!c.spec().calibration || gpus.empty()) return nullptr;
  bool inter = false;
  for (int g : gpus) inter = inter || c.node_of_gpu(g) != c.node_of_gpu(gpus.front());
  // The engines' custom all-reduce works over NVLink peers of one node only (IPC buffers).
  if (kind == CollectiveKind::kAllReduce && !inter && c.spec().custom_all_reduce)
    if (const CollectiveCalibration* custom = c.spec().calibration->collective(
            custom_all_reduce_name(c.spec().kernel_engine), CollectiveScope::kIntraNode, static_cast<int>(gpus.size())))
      return custom;
  return c.spec().calibration->collective(collective_calibration_name(kind),
                                          inter ? CollectiveScope::kInterNode : CollectiveScope::kIntraNode,
                                          static_cast<int>(gpus.size()));
}

namespace {

const CollectiveCalibration* calibration_of(const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus) {
  return collective_calibration(c, kind, gpus);
}

/// True when collectives are priced by NCCL's tuning model: collective_model "nccl" and no measured
/// curve for this collective (a calibration profile's efficiencies are measured against line rate).
bool nccl_priced(const Cluster& c, const CollectiveCalibration* cal) {
  return !cal && c.spec().collective_model == "nccl";
}

TaskId launch(TaskGraph& g, const Cluster& c, const CollectiveCalibration* cal, Phase phase, int layer,
              TaskGraph::Deps deps) {
  return g.delay(us_to_ticks(cal ? cal->launch_us : c.spec().collective_launch_us), phase, layer, deps);
}

// The factor on the bytes the flows carry so that line-rate transfers take as long as the measured
// protocol does: a collective reaching a fraction η of the link rate moves bytes/η at line rate.
double wire_scale(const CollectiveCalibration* cal, double buffer_bytes) {
  return cal ? 1.0 / cal->efficiency.at(std::max(1.0, buffer_bytes)) : 1.0;
}

/// How NCCL's choice becomes flows: each flow carries its bytes × `scale`, so that at line rate the
/// transfer takes NCCL's bytes / algorithm bandwidth, and the launch delay is NCCL's latency, which
/// includes the hops (the flows skip their own: HopLatency::kInLaunch). On an idle cluster the
/// collective then takes NCCL's `latency + bytes / bandwidth`; under load its flows share links
/// like any others.
struct NcclFit {
  double scale = 1.0;
  Tick launch = 0;
};
NcclFit fit_to_nccl(const NcclCandidate& k, double buffer_bytes, double line_seconds) {
  NcclFit f;
  const double nccl_seconds = k.alg_GBps > 0 ? buffer_bytes / (k.alg_GBps * 1e9) : 0.0;
  f.scale = line_seconds > 0 ? nccl_seconds / line_seconds : 1.0;
  f.launch = us_to_ticks(k.latency_us);
  return f;
}

// `steps` ring steps of `chunk` bytes split over the ring channels; on each ring, step s on
// edge i→i+1 waits for step s-1 on edge i-1→i (the data it forwards). Every flow carries its
// bytes × `scale` at line rate.
TaskId ring_flows(TaskGraph& g, const Cluster& c, const std::vector<RingChannel>& rings, int steps, double chunk,
                  double scale, TaskId start, Phase phase, int layer, HopLatency hop) {
  std::vector<TaskId> ends;
  for (const auto& ch : rings) {
    const double share = chunk * ch.share;
    const std::vector<int>& ring = ch.order;
    const std::size_t n = ring.size();
    std::vector<TaskId> prev(n, start), cur(n);
    for (int s = 0; s < steps; ++s) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t from = (i + n - 1) % n;
        const TaskId dep[] = {prev[from], prev[i]};
        cur[i] = g.transfer(c.gpu_endpoint(ring[i]), c.gpu_endpoint(ring[(i + 1) % n]), share, phase, layer, dep,
                            ring[i]);
        g.price_transfer(cur[i], scale, hop);
      }
      std::swap(prev, cur);
    }
    ends.insert(ends.end(), prev.begin(), prev.end());
  }
  return g.join(ends, phase, layer);
}

TaskId add_nccl_collective(TaskGraph& g, const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus,
                           int steps, double buffer_bytes, double chunk, Phase phase, int layer,
                           TaskGraph::Deps deps) {
  const NcclChoice choice = nccl_choose(c, kind, gpus, buffer_bytes);
  LinkLoads load(c);
  if (choice.best.algo == NcclAlgo::kTree) {
    const int channels = nccl_tree_channels(choice.topo);
    std::vector<std::vector<std::pair<int, int>>> per_channel;
    const double share = buffer_bytes / channels;
    for (int k = 0; k < channels; ++k) {
      per_channel.push_back(tree_edges(c, gpus, k));
      for (const auto& [child, parent] : per_channel.back()) {
        load.add(child, parent, share);
        load.add(parent, child, share);
      }
    }
    const NcclFit fit = fit_to_nccl(choice.best, buffer_bytes, load.seconds());
    const TaskId start = g.delay(fit.launch, phase, layer, deps);
    const TaskId dep[] = {start};
    std::vector<TaskId> ends{start};
    for (const auto& edges : per_channel)
      for (const auto& [child, parent] : edges) {
        ends.push_back(g.transfer(c.gpu_endpoint(child), c.gpu_endpoint(parent), share, phase, layer, dep, child));
        g.price_transfer(ends.back(), fit.scale, HopLatency::kInLaunch);
        ends.push_back(g.transfer(c.gpu_endpoint(parent), c.gpu_endpoint(child), share, phase, layer, dep, parent));
        g.price_transfer(ends.back(), fit.scale, HopLatency::kInLaunch);
      }
    return g.join(ends, phase, layer);
  }
  // Ring (and NVLS, whose switch-side reduction we place on the ring's links).
  const auto rings = ring_channels(c, gpus, kMaxRingChannels);
  for (const auto& ch : rings)
    for (std::size_t i = 0; i < ch.order.size(); ++i)
      load.add(ch.order[i], ch.order[(i + 1) % ch.order.size()], chunk * ch.share);
  const NcclFit fit = fit_to_nccl(choice.best, buffer_bytes, steps * load.seconds());
  const TaskId start = g.delay(fit.launch, phase, layer, deps);
  return ring_flows(g, c, rings, steps, chunk, fit.scale, start, phase, layer, HopLatency::kInLaunch);
}

TaskId add_ring_steps(TaskGraph& g, const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus, int steps,
                      double buffer_bytes, double chunk, Phase phase, int layer, TaskGraph::Deps deps) {
  const CollectiveCalibration* cal = calibration_of(c, kind, gpus);
  if (gpus.size() < 2) return g.delay(0, phase, layer, deps);  // nothing to exchange
  if (nccl_priced(c, cal)) return add_nccl_collective(g, c, kind, gpus, steps, buffer_bytes, chunk, phase, layer, deps);
  const TaskId start = launch(g, c, cal, phase, layer, deps);
  return ring_flows(g, c, ring_channels(c, gpus, kMaxRingChannels), steps, chunk, wire_scale(cal, buffer_bytes),
                    start, phase, layer, cal && cal->hops_in_launch ? HopLatency::kInLaunch : HopLatency::kPaid);
}

}  // namespace

std::vector<std::pair<int, int>> tree_edges(const Cluster& c, const std::vector<int>& gpus, int channel) {
  std::vector<int> node_ids;
  std::map<int, std::vector<int>> by_node;
  for (int g : gpus) {
    const int nd = c.node_of_gpu(g);
    if (!by_node.count(nd)) node_ids.push_back(nd);
    by_node[nd].push_back(g);
  }
  std::vector<std::pair<int, int>> edges;  // (child, parent)
  std::vector<int> heads;
  for (int nd : node_ids) {
    const auto& local = by_node[nd];
    const std::size_t m = local.size(), r = static_cast<std::size_t>(channel) % m;
    for (std::size_t i = 1; i < m; ++i) edges.emplace_back(local[(r + i) % m], local[(r + i - 1) % m]);
    heads.push_back(local[r]);
  }
  for (std::size_t i = 1; i < heads.size(); ++i) edges.emplace_back(heads[i], heads[(i - 1) / 2]);
  return edges;
}

namespace {
/// What NCCL's send from `src_gpu` to `dst_gpu` costs apart from its size: `bytes` picks only the
/// protocol.
Cluster::P2pFigures p2p_figures(const Cluster& c, int src_gpu, int dst_gpu, double bytes) {
  const NcclCandidate k = nccl_p2p(c, src_gpu, dst_gpu, bytes);
  return {k.latency_us, k.alg_GBps, c.route_bandwidth_Bps(c.gpu_endpoint(src_gpu), c.gpu_endpoint(dst_gpu)), true};
}

P2pPricing nccl_p2p_priced(const Cluster::P2pFigures& f, double bytes) {
  NcclCandidate k;
  k.latency_us = f.latency_us;
  k.alg_GBps = f.alg_GBps;
  const NcclFit fit = fit_to_nccl(k, bytes, bytes / f.route_Bps);
  return {fit.launch, fit.scale, HopLatency::kInLaunch};
}
}  // namespace

P2pPricing price_p2p(const Cluster& c, int src_gpu, int dst_gpu, double bytes) {
  if (c.spec().collective_model != "nccl" || src_gpu == dst_gpu)
    return {us_to_ticks(c.spec().collective_launch_us), 1.0, HopLatency::kPaid};
  // A layer-queue run sends millions of messages between a few GPUs: their figures are kept per
  // (pair, protocol) on clusters of up to 128 GPUs (512 KB), worked out per message beyond.
  constexpr int kMemoGpus = 128;
  const int G = c.num_gpus();
  if (G > kMemoGpus || src_gpu < 0 || dst_gpu < 0 || src_gpu >= G || dst_gpu >= G)
    return nccl_p2p_priced(p2p_figures(c, src_gpu, dst_gpu, bytes), bytes);
  std::vector<Cluster::P2pFigures>& memo = c.p2p_pair_memo();
  if (memo.empty()) memo.resize(2 * static_cast<std::size_t>(G) * static_cast<std::size_t>(G));
  const std::size_t key = (static_cast<std::size_t>(src_gpu) * static_cast<std::size_t>(G) +
                           static_cast<std::size_t>(dst_gpu)) * 2 + (bytes <= kNcclP2pLLThreshold ? 0 : 1);
  if (!memo[key].known) memo[key] = p2p_figures(c, src_gpu, dst_gpu, bytes);
  return nccl_p2p_priced(memo[key], bytes);
}

TaskId add_ring_all_reduce(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus, double bytes,
                           Phase phase, int layer, TaskGraph::Deps deps) {
  const int n = static_cast<int>(gpus.size());
  return add_ring_steps(g, c, CollectiveKind::kAllReduce, gpus, 2 * (n - 1), bytes, bytes / std::max(1, n), phase,
                        layer, deps);
}

TaskId add_ring_all_gather(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus,
                           double bytes_per_gpu, Phase phase, int layer, TaskGraph::Deps deps) {
  const int n = static_cast<int>(gpus.size());
  return add_ring_steps(g, c, CollectiveKind::kAllGather, gpus, n - 1, bytes_per_gpu * n, bytes_per_gpu, phase, layer,
                        deps);
}

std::vector<std::vector<double>> transpose_of(const std::vector<std::vector<double>>& m) {
  const std::size_t n = m.size();
  std::vector<std::vector<double>> t(n, std::vector<double>(n));
  constexpr std::size_t kTile = 16;
  for (std::size_t i0 = 0; i0 < n; i0 += kTile)
    for (std::size_t j0 = 0; j0 < n; j0 += kTile)
      for (std::size_t i = i0; i < std::min(n, i0 + kTile); ++i)
        for (std::size_t j = j0; j < std::min(n, j0 + kTile); ++j) t[i][j] = m[j][i];
  return t;
}

std::vector<TaskId> add_all_to_all(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus,
                                   const std::vector<std::vector<double>>& bytes, Phase phase,
                                   int layer, const std::vector<TaskId>& start, bool transposed) {
  const std::size_t n = gpus.size();
  const CollectiveCalibration* cal = calibration_of(c, CollectiveKind::kAllToAll, gpus);
  const bool nccl = nccl_priced(c, cal);
  const bool closed_form = c.spec().all_to_all_model == "closed-form";
  // Only the closed-form pricing with NCCL's model reads a transpose as it is (by columns).
  if (transposed && !(closed_form && nccl)) return add_all_to_all(g, c, gpus, transpose_of(bytes), phase, layer, start);
  // The per-rank buffer (what nccl-tests calls size): the mean bytes a GPU sends. Only a measured
  // efficiency curve reads it (NCCL's model prices each pair by its own size).
  double buffer = 0.0;
  if (!nccl) {
    double total = 0.0;
    for (const auto& row : bytes)
      for (double b : row) total += b;
    buffer = total / static_cast<double>(std::max<std::size_t>(1, n));
  }
  // NCCL runs all-to-all as grouped sends and receives: each pair is priced as one message, and
  // a GPU's call waits for its slowest pair's latency. A message's price depends only on its
  // protocol (by size) and its path, which nodes share (routes depend on the GPUs' local indices
  // and whether they share a node), so prices are kept per (same node?, protocol, local pair):
  // G² pairs at 1,024 GPUs, 4 · 8² prices. What a price takes apart from the size is worked out
  // once per cluster (Cluster::p2p_memo); the price itself once per call, from the first pair's
  // bytes, as price_p2p would.
  const int per_node = c.spec().gpus_per_node;
  const std::size_t keys = nccl ? 4 * static_cast<std::size_t>(per_node) * per_node : 0;
  std::vector<Cluster::P2pFigures>& figures = c.p2p_memo();
  if (figures.size() < keys) figures.resize(keys);
  // Thread-locals are bound to references once: each use of one by name computes its address.
  thread_local std::vector<P2pPricing> path_price_storage;
  thread_local std::vector<char> have_storage;
  std::vector<P2pPricing>& path_price = path_price_storage;
  std::vector<char>& have = have_storage;
  path_price.resize(keys);
  have.assign(keys, 0);
  // Per GPU its node and local index, so that a pair's key takes no division (10^6 pairs a call
  // at 1,024 GPUs).
  thread_local std::vector<int> node_of_storage, local_of_storage;
  std::vector<int>& node_of = node_of_storage;
  std::vector<int>& local_of = local_of_storage;
  node_of.resize(n);
  local_of.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    node_of[i] = c.node_of_gpu(gpus[i]);
    local_of[i] = gpus[i] % per_node;
  }
  const auto price_key = [&](std::size_t i, std::size_t j, double bytes_ij) {
    const std::size_t key = ((static_cast<std::size_t>(node_of[i] != node_of[j]) * 2 +
                              (bytes_ij <= kNcclP2pLLThreshold ? 0 : 1)) * static_cast<std::size_t>(per_node) +
                             static_cast<std::size_t>(local_of[i])) * static_cast<std::size_t>(per_node) +
                            static_cast<std::size_t>(local_of[j]);
    if (!have[key]) {
      if (!figures[key].known) figures[key] = p2p_figures(c, gpus[i], gpus[j], bytes_ij);
      path_price[key] = nccl_p2p_priced(figures[key], bytes_ij);
      have[key] = 1;
    }
    return static_cast<std::uint32_t>(key);
  };
  // Without NCCL's model every pair has the same price (the measured curve's, or line rate).
  const P2pPricing line_price{0, nccl ? 1.0 : wire_scale(cal, buffer), HopLatency::kPaid};
  // Each pair's price, once, as its key into path_price (4 bytes a pair, not a copy of the price).
  // A closed-form all-to-all (hardware.all_to_all_model) takes each pair's bytes and price here
  // instead, and plans no transfer.
  thread_local ClosedFormAllToAll closed_storage;
  ClosedFormAllToAll& closed = closed_storage;
  if (closed_form) closed.start(c, gpus);
  thread_local std::vector<std::uint32_t> pair_key_storage;
  std::vector<std::uint32_t>& pair_key = pair_key_storage;
  if (nccl && !closed_form) pair_key.resize(n * n);
  thread_local std::vector<Tick> launch_ticks_storage;
  std::vector<Tick>& launch_ticks = launch_ticks_storage;
  launch_ticks.assign(n, 0);
  if (nccl && closed_form && transposed) {
    // Row j of the transpose is column j: the pairs i → j. A key's price is then worked out from
    // its first pair by columns rather than by rows; only its bytes' last bit can differ (NCCL's
    // wire scale is the path's bandwidth over the protocol's, a ratio of two sizes' times), and the
    // executor rounds it to a float anyway.
    for (std::size_t j = 0; j < n; ++j) {
      const std::vector<double>& column = bytes[j];
      closed.add_column(j, column, [&](std::size_t i) -> const P2pPricing& {
        const P2pPricing& p = path_price[price_key(i, j, column[i])];
        launch_ticks[i] = std::max(launch_ticks[i], p.launch);
        return p;
      });
    }
  } else if (nccl && closed_form) {
    for (std::size_t i = 0; i < n; ++i) {
      Tick launch_i = launch_ticks[i];
      const std::vector<double>& row = bytes[i];
      closed.add_row(i, row, [&](std::size_t j) -> const P2pPricing& {
        const P2pPricing& p = path_price[price_key(i, j, row[j])];
        launch_i = std::max(launch_i, p.launch);
        return p;
      });
      launch_ticks[i] = launch_i;
    }
  } else if (nccl) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        if (i == j || bytes[i][j] <= 0.0) continue;  // local tokens do not cross a link
        const std::uint32_t key = price_key(i, j, bytes[i][j]);
        pair_key[i * n + j] = key;
        launch_ticks[i] = std::max(launch_ticks[i], path_price[key].launch);
      }
  } else if (closed_form) {
    for (std::size_t i = 0; i < n; ++i)
      closed.add_row(i, bytes[i], [&](std::size_t) -> const P2pPricing& { return line_price; });
  }
  thread_local std::vector<TaskId> launched;
  launched.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const TaskId dep[] = {start[i]};
    launched[i] = nccl ? g.delay(launch_ticks[i], phase, layer, dep) : launch(g, c, cal, phase, layer, dep);
  }
  if (closed_form) return closed.plan(g, bytes, phase, layer, launched, transposed);
  // The transfers, row by row: their ids are consecutive from first_flow in this order.
  const auto first_flow = static_cast<TaskId>(g.size());
  for (std::size_t i = 0; i < n; ++i) {
    const int src = c.gpu_endpoint(gpus[i]);
    const TaskId dep[] = {launched[i]};
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j || bytes[i][j] <= 0.0) continue;
      const P2pPricing& p = nccl ? path_price[pair_key[i * n + j]] : line_price;
      const TaskId f = g.transfer(src, c.gpu_endpoint(gpus[j]), bytes[i][j], phase, layer, dep, gpus[i]);
      g.price_transfer(f, p.wire_scale, p.hop);
    }
  }
  const auto flows_end = static_cast<TaskId>(g.size());
  // GPU i's call ends when its launch and every transfer from or to it have. The calls are added
  // first (ids in GPU order), then each transfer's two edges, row by row: a transfer's successor
  // list gets the lower GPU's call before the higher's, as when each call listed its transfers,
  // and no column of the n x n matrix is walked (at 1,024 GPUs that walk was a cache miss a pair).
  // all-to-all-balanced (core/invariants.hpp): what the calls wait to send is what they wait to
  // receive, flow for flow and byte for byte, and both are the matrix off its diagonal; the
  // transfers walked are exactly the ones added, the last going where its pair says.
  std::vector<TaskId> done(n);
  for (std::size_t i = 0; i < n; ++i) {
    const TaskId dep[] = {launched[i]};
    done[i] = g.join(dep, phase, layer);
  }
  thread_local std::vector<double> received;
  received.assign(n, 0.0);
  std::size_t flows_sent = 0, flows_received = 0, flows_made = 0;
  double bytes_sent = 0.0, bytes_received = 0.0, bytes_off_diagonal = 0.0;
  TaskId f = first_flow;
  bool last_matches = true;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j || bytes[i][j] <= 0.0) continue;
      ++flows_made;
      bytes_off_diagonal += bytes[i][j];
      if (f >= flows_end) continue;  // more pairs than transfers: the check below reports it
      if (f + 1 == flows_end)
        last_matches = g.task(f).src == c.gpu_endpoint(gpus[i]) && g.task(f).dst == c.gpu_endpoint(gpus[j]);
      g.depend(done[std::min(i, j)], f);
      g.depend(done[std::max(i, j)], f);
      ++f;
      ++flows_sent;
      bytes_sent += bytes[i][j];
      ++flows_received;
      received[j] += bytes[i][j];
    }
  const std::size_t transfers_added = flows_end - first_flow;
  for (const double b : received) bytes_received += b;
  const double tolerance = 1e-9 * bytes_off_diagonal;
  check_invariant(flows_sent == flows_made && flows_received == flows_made && transfers_added == flows_made &&
                      last_matches && std::abs(bytes_sent - bytes_off_diagonal) <= tolerance &&
                      std::abs(bytes_received - bytes_off_diagonal) <= tolerance,
                  Invariant::kAllToAllBalanced, [&] {
                    return "layer " + std::to_string(layer) + ": " + std::to_string(flows_made) + " flows of " +
                           std::to_string(bytes_off_diagonal) + " bytes; the calls send " + std::to_string(flows_sent) +
                           " (" + std::to_string(bytes_sent) + " bytes) and receive " + std::to_string(flows_received) +
                           " (" + std::to_string(bytes_received) + " bytes) of " + std::to_string(transfers_added) +
                           " transfers added" + (last_matches ? "" : ", the last not between its pair's GPUs");
                  });
  return done;
}

Tick collective_time(const Cluster& c, CollectiveKind kind, int gpus, double bytes) {
  if (gpus < 1 || gpus > c.num_gpus())
    throw std::invalid_argument("collective needs between 1 and " + std::to_string(c.num_gpus()) + " GPUs");
  if (kind == CollectiveKind::kSendRecv && gpus < 2)
    throw std::invalid_argument("send/recv needs at least 2 GPUs");
  std::vector<int> ids(gpus);
  for (int i = 0; i < gpus; ++i) ids[i] = i;
  TaskGraph g;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      add_ring_all_reduce(g, c, ids, bytes, phase::kCollective, -1, {});
      break;
    case CollectiveKind::kAllGather:
      add_ring_all_gather(g, c, ids, bytes / gpus, phase::kCollective, -1, {});
      break;
    case CollectiveKind::kAllToAll: {
      const TaskId start = g.join({});
      std::vector<std::vector<double>> m(gpus, std::vector<double>(gpus, bytes / gpus));
      add_all_to_all(g, c, ids, m, phase::kCollective, -1, std::vector<TaskId>(gpus, start));
      break;
    }
    case CollectiveKind::kSendRecv: {
      const std::vector<int> pair{0, gpus - 1};
      const CollectiveCalibration* cal = calibration_of(c, kind, pair);
      const P2pPricing p = nccl_priced(c, cal) ? price_p2p(c, 0, gpus - 1, bytes)
                                               : P2pPricing{0, wire_scale(cal, bytes), HopLatency::kPaid};
      const TaskId start = nccl_priced(c, cal) ? g.delay(p.launch, phase::kCollective, -1, {})
                                               : launch(g, c, cal, phase::kCollective, -1, {});
      const TaskId dep[] = {start};
      const TaskId f = g.transfer(c.gpu_endpoint(0), c.gpu_endpoint(gpus - 1), bytes, phase::kCollective, -1, dep, 0);
      g.price_transfer(f, p.wire_scale, p.hop);
      break;
    }
  }
  const ComputeCostModel no_compute(c.spec().gpu);  // the plan has transfers and delays only
  ClusterRun run(c, no_compute);
  run.exec.run(g);
  return run.sim.now();
}

}  // namespace moesim
