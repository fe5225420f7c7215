#include "calibrate/profile.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "calibrate/fit.hpp"
#include "hardware/collectives.hpp"

namespace moesim::calibration {
namespace {

DType dtype_of(const std::string& s) {
  DType d;
  if (!parse_dtype(s, d)) throw std::runtime_error("unknown dtype '" + s + "'");
  return d;
}

CollectiveKind kind_of(const std::string& op) {
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kAllToAll,
                 CollectiveKind::kSendRecv})
    if (op == collective_calibration_name(k)) return k;
  throw std::runtime_error("unknown collective '" + op + "'");
}

Op gemm_op(const GemmSample& s) {
  const DType dt = dtype_of(s.dtype);
  return s.group_m.empty() ? make_gemm("gemm", s.m, s.n, s.k, dt) : make_grouped_gemm("gemm", s.group_m, s.n, s.k, dt);
}

// Indices of `items` grouped by `key`, each group sorted by `size`, marked by is_held_out.
template <typename T, typename KeyFn, typename SizeFn>
std::vector<char> mask(const std::vector<T>& items, KeyFn key, SizeFn size, double fraction) {
  std::map<decltype(key(items.front())), std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < items.size(); ++i) groups[key(items[i])].push_back(i);
  std::vector<char> out(items.size(), 0);
  for (auto& [_, idx] : groups) {
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return size(items[a]) < size(items[b]); });
    for (std::size_t j = 0; j < idx.size(); ++j) out[idx[j]] = is_held_out(j, idx.size(), fraction) ? 1 : 0;
  }
  return out;
}

}  // namespace

HoldoutMasks held_out_samples(const Measurements& m, double fraction) {
  HoldoutMasks h;
  if (!m.gemm.empty())
    h.gemm = mask(m.gemm, [](const GemmSample& s) { return std::make_tuple(s.dtype, s.n, s.k, s.group_m.size()); },
                  [](const GemmSample& s) { return s.m; }, fraction);
  if (!m.memcpy.empty())
    h.memcpy = mask(m.memcpy, [](const MemcpySample& s) { return std::make_tuple(s.kind, s.src, s.dst); },
                    [](const MemcpySample& s) { return s.bytes; }, fraction);
  if (!m.collectives.empty())
    h.collectives = mask(m.collectives, [](const CollectiveSample& s) { return std::make_tuple(s.op, s.nodes, s.gpus); },
                         [](const CollectiveSample& s) { return s.bytes; }, fraction);
  return h;
}

std::optional<ClusterSpec> cluster_for(const ClusterSpec& base, const CollectiveSample& s) {
  if (s.gpus < 1 || s.nodes < 1 || s.gpus % s.nodes != 0) return std::nullopt;
  const int per = s.gpus / s.nodes;
  ClusterSpec c = base;
  c.nodes = s.nodes;
  if (s.nodes == 1) {
    if (per > base.gpus_per_node) return std::nullopt;
    c.nodes = 1;  // the sample uses the first `per` GPUs of one node
    return c;
  }
  if (per != base.gpus_per_node) {
    if (base.fabric == Fabric::kHybridCubeMesh) return std::nullopt;  // only defined for 8 GPUs
    c.gpus_per_node = per;
    int sw = std::min(base.gpus_per_pcie_switch, per);
    while (per % sw != 0) --sw;
    c.gpus_per_pcie_switch = sw;
    const int switches = per / sw;
    c.sockets = std::min(base.sockets, switches);
    while (switches % c.sockets != 0) --c.sockets;
    c.nics_per_node = std::max(1, std::min(base.nics_per_node, per));
  }
  try {
    const Cluster check(c);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  return c;
}

SamplePredictor::SamplePredictor(ClusterSpec spec) : spec_(std::move(spec)), cost_(ComputeCostModel::for_cluster(spec_)) {}

std::optional<double> SamplePredictor::us(const GemmSample& s) const { return cost_.kernel_seconds(gemm_op(s)) * 1e6; }

const Cluster* SamplePredictor::cluster(const CollectiveSample& s) {
  const auto key = std::make_pair(s.nodes, s.gpus / std::max(1, s.nodes));
  auto it = clusters_.find(key);
  if (it == clusters_.end()) {
    const auto spec = cluster_for(spec_, s);
    it = clusters_.emplace(key, spec ? std::make_unique<Cluster>(*spec) : nullptr).first;
  }
  return it->second.get();
}

std::optional<double> SamplePredictor::us(const CollectiveSample& s) {
  const Cluster* c = cluster(s);
  if (!c) return std::nullopt;
  return ticks_to_us(collective_time(*c, kind_of(s.op), s.gpus, s.bytes));
}

std::optional<double> SamplePredictor::us(const MemcpySample& s) {
  if (spec_.calibration) {
    const auto it = spec_.calibration->links.find(s.kind);
    if (it != spec_.calibration->links.end()) return it->second.latency_us + s.bytes / (it->second.bandwidth_GBps * 1e3);
  }
  if (s.kind == "d2d")  // read and write through HBM
    return 2.0 * s.bytes / (spec_.gpu.hbm_bandwidth_Bps * cost_.efficiency().memory) * 1e6;
  CollectiveSample one{"send_recv", 1, 1, 0.0, 0.0};
  const Cluster* c = cluster(one);
  if (!c) return std::nullopt;
  int src = c->host_endpoint(0), dst = c->gpu_endpoint(0);
  if (s.kind.rfind("d2h", 0) == 0) std::swap(src, dst);
  if (s.kind == "p2p") {
    if (std::max(s.src, s.dst) >= c->num_gpus()) return std::nullopt;
    src = c->gpu_endpoint(s.src);
    dst = c->gpu_endpoint(s.dst);
  }
  return ticks_to_us(c->route_latency(src, dst)) + s.bytes / c->route_bandwidth_Bps(src, dst) * 1e6;
}

HardwareCalibration fit_profile(const Measurements& m, const ClusterSpec& base, const std::string& base_name,
                                double holdout) {
  HardwareCalibration h;
  h.base = base_name;
  h.device = m.device;
  h.holdout = holdout;
  const HoldoutMasks held = held_out_samples(m, holdout);
  ClusterSpec plain = base;
  plain.calibration = nullptr;
  const ComputeCostModel def = ComputeCostModel::for_cluster(plain);

  // GEMMs: a measured efficiency curve per shape, and the default curve's two efficiencies.
  std::map<std::tuple<DType, std::int64_t, std::int64_t>, std::vector<std::pair<double, double>>> curves;
  std::vector<std::vector<double>> cx, mx;
  std::vector<double> cy, my, cw, mw;
  for (std::size_t i = 0; i < m.gemm.size(); ++i) {
    const GemmSample& s = m.gemm[i];
    if (held.gemm[i]) continue;
    const Op op = gemm_op(s);
    const double t = s.time_us * 1e-6;
    const double peak = plain.gpu.peak(op.dtype) > 0 ? plain.gpu.peak(op.dtype) : plain.gpu.peak(DType::kFp32);
    if (s.group_m.empty()) curves[{op.dtype, s.n, s.k}].emplace_back(static_cast<double>(s.m), op.flops / (peak * t));
    const double shape = def.gemm_efficiency_parts(s.m, s.n, s.k, 1, op.dtype).efficiency / def.efficiency().gemm_peak;
    const double compute_x = op.flops / (peak * shape);
    const double memory_x = op.bytes / plain.gpu.hbm_bandwidth_Bps;
    const bool compute_bound = compute_x / def.efficiency().gemm_peak > memory_x / def.efficiency().memory;
    (compute_bound ? cx : mx).push_back({compute_bound ? compute_x : memory_x});
    (compute_bound ? cy : my).push_back(t);
    (compute_bound ? cw : mw).push_back(1.0 / t);
  }
  for (auto& [key, pts] : curves) h.gemm[key] = median_curve(std::move(pts));
  if (cx.size() >= 3) h.gemm_peak = std::clamp(1.0 / least_squares(cx, cy, cw)[0], 0.05, 1.0);
  if (mx.size() >= 3) h.memory_efficiency = std::clamp(1.0 / least_squares(mx, my, mw)[0], 0.05, 1.0);

  // Collectives: t = launch + L + K(B)/η(B), where the uncalibrated flow model gives the hop
  // latencies L and the line-rate transfer time K(B). A weighted least-squares fit of
  // (t − L) = launch + K/η̄ gives the launch cost; each sample then yields its own η.
  ClusterSpec no_launch = plain;
  no_launch.collective_launch_us = 0.0;
  no_launch.collective_model = "line-rate";  // efficiencies are fractions of line rate
  SamplePredictor line_rate(no_launch);
  std::map<std::tuple<std::string, int, int>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < m.collectives.size(); ++i)
    if (!held.collectives[i]) groups[{m.collectives[i].op, m.collectives[i].nodes, m.collectives[i].gpus}].push_back(i);
  for (const auto& [key, idx] : groups) {
    std::vector<std::vector<double>> X;
    std::vector<double> y, w, K, L, t;
    std::vector<double> bytes;
    for (std::size_t i : idx) {
      CollectiveSample s = m.collectives[i];
      const auto full = line_rate.us(s);
      s.bytes = 0.0;
      const auto latency = line_rate.us(s);
      if (!full || !latency) continue;
      L.push_back(*latency);
      K.push_back(*full - *latency);
      t.push_back(m.collectives[i].time_us);
      bytes.push_back(m.collectives[i].bytes);
      X.push_back({1.0, K.back()});
      y.push_back(t.back() - L.back());
      w.push_back(1.0 / t.back());
    }
    if (X.size() < 2) continue;
    const auto beta = least_squares(X, y, w);
    CollectiveCalibration cal;
    cal.launch_us = std::max(0.0, beta[0]);
    std::vector<std::pair<double, double>> pts;
    for (std::size_t j = 0; j < t.size(); ++j) {
      const double transfer = t[j] - L[j] - cal.launch_us;
      // Where launch and latency are (nearly) all of the time, η is not observable.
      if (K[j] <= 0.0 || transfer < 0.05 * t[j]) continue;
      pts.emplace_back(bytes[j], std::clamp(K[j] / transfer, 0.01, 2.0));
    }
    cal.efficiency = pts.empty() ? EfficiencyCurve{{1.0}, {std::clamp(beta[1] > 0 ? 1.0 / beta[1] : 1.0, 0.01, 2.0)}}
                                 : median_curve(std::move(pts));
    const auto scope = std::get<1>(key) > 1 ? CollectiveScope::kInterNode : CollectiveScope::kIntraNode;
    h.collectives[{std::get<0>(key), scope}][std::get<2>(key)] = cal;
  }

  // Host links: t = latency + bytes / bandwidth per memcpy kind.
  std::map<std::string, std::vector<std::size_t>> kinds;
  for (std::size_t i = 0; i < m.memcpy.size(); ++i)
    if (!held.memcpy[i]) kinds[m.memcpy[i].kind].push_back(i);
  for (const auto& [kind, idx] : kinds) {
    std::vector<std::vector<double>> X;
    std::vector<double> y, w;
    for (std::size_t i : idx) {
      X.push_back({1.0, m.memcpy[i].bytes});
      y.push_back(m.memcpy[i].time_us);
      w.push_back(1.0 / m.memcpy[i].time_us);
    }
    if (X.size() < 2) continue;
    const auto beta = least_squares(X, y, w);
    if (beta[1] <= 0.0) continue;
    h.links[kind] = LinkFit{std::max(0.0, beta[0]), 1.0 / beta[1] / 1e3};  // bytes/us → GB/s
  }
  return h;
}

}  // namespace moesim::calibration
