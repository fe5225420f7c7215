#include "hardware/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim {

ComputeCostModel::ComputeCostModel(GpuSpec gpu, ComputeEfficiency eff,
                                   std::shared_ptr<const HardwareCalibration> calibration)
    : gpu_(std::move(gpu)), eff_(eff), calibration_(std::move(calibration)) {
  if (calibration_) {
    if (calibration_->gemm_peak) eff_.gemm_peak = *calibration_->gemm_peak;
    if (calibration_->memory_efficiency) eff_.memory = *calibration_->memory_efficiency;
  }
}

ComputeCostModel ComputeCostModel::for_cluster(const ClusterSpec& spec) {
  ComputeEfficiency eff;
  eff.flops_only = spec.compute_model == "flops-only";
  return ComputeCostModel(spec.gpu, eff, spec.calibration);
}

double ComputeCostModel::gemm_compute_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dt) const {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (calibration_) {
    // A measured curve already contains the memory-bound regime: it is the whole kernel time.
    if (const EfficiencyCurve* c = calibration_->gemm_curve(dt, n, k))
      return flops / (peak(dt) * c->at(static_cast<double>(m)));
  }
  return flops / (peak(dt) * gemm_efficiency(m, n, k));
}

double ComputeCostModel::flops_only_seconds(const Op& op) const {
  switch (op.kind) {
    case OpKind::kGemm:
    case OpKind::kGroupedGemm: return op.flops / (peak(op.dtype) * eff_.gemm_peak);
    case OpKind::kAttention: return op.flops / (peak(op.dtype) * eff_.attention);
    case OpKind::kElementwise: return op.flops / (peak(DType::kFp32) * eff_.elementwise_flops);
  }
  return 0.0;
}

double ComputeCostModel::peak(DType t) const {
  double p = gpu_.peak(t);
  // A dtype without tensor-core support runs at the fp32 rate (e.g. bf16 on V100 is emulated).
  if (p <= 0.0) p = gpu_.peak(DType::kFp32);
  if (p <= 0.0) throw std::invalid_argument("GPU " + gpu_.name + " has no usable peak FLOP/s");
  return p;
}

double ComputeCostModel::gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k) const {
  return gemm_efficiency_parts(m, n, k).efficiency;
}

GemmEfficiencyParts ComputeCostModel::gemm_efficiency_parts(std::int64_t m, std::int64_t n, std::int64_t k) const {
  GemmEfficiencyParts p;
  if (m <= 0 || n <= 0 || k <= 0) {
    p.efficiency = eff_.gemm_peak;
    return p;
  }
  // Tile quantisation: a kernel computes whole tiles, so an m of 65 with 128-row tiles does the
  // work of 128 rows. Small problems pick smaller tiles, so the tile never exceeds the padded dim.
  auto tile_for = [this](std::int64_t d) {
    std::int64_t tile = eff_.gemm_tile;
    while (tile > 16 && d <= tile / 2) tile /= 2;
    return tile;
  };
  auto use = [](std::int64_t d, std::int64_t tile) {
    const std::int64_t padded = (d + tile - 1) / tile * tile;
    return static_cast<double>(d) / static_cast<double>(padded);
  };
  p.tile_m = tile_for(m);
  p.tile_n = tile_for(n);
  p.use_m = use(m, p.tile_m);
  p.use_n = use(n, p.tile_n);
  const double kd = static_cast<double>(k);
  p.k_loop = std::min(1.0, kd / (kd + eff_.gemm_k_half) * 1.5);
  p.efficiency = eff_.gemm_peak * p.use_m * p.use_n * p.k_loop;
  return p;
}

double ComputeCostModel::kernel_seconds(const Op& op) const {
  if (eff_.flops_only) return flops_only_seconds(op);
  const double bw = gpu_.hbm_bandwidth_Bps * eff_.memory;
  const double mem_s = op.bytes / bw;
  double compute_s = 0.0;
  switch (op.kind) {
    case OpKind::kGemm: {
      const bool measured = calibration_ && calibration_->gemm_curve(op.dtype, op.n, op.k);
      compute_s = static_cast<double>(op.batch) * gemm_compute_seconds(op.m, op.n, op.k, op.dtype);
      if (measured) return compute_s;
      break;
    }
    case OpKind::kGroupedGemm: {
      // One kernel over all groups: each group's tiles are quantised on its own.
      const bool measured = calibration_ && calibration_->gemm_curve(op.dtype, op.n, op.k);
      for (auto m : op.group_m)
        if (m > 0) compute_s += gemm_compute_seconds(m, op.n, op.k, op.dtype);
      if (measured) return compute_s;
      break;
    }
    case OpKind::kAttention:
      compute_s = op.flops / (peak(op.dtype) * eff_.attention);
      break;
    case OpKind::kElementwise:
      compute_s = op.flops / (peak(DType::kFp32) * eff_.elementwise_flops);
      break;
  }
  return std::max(compute_s, mem_s);
}

Tick ComputeCostModel::op_time(const Op& op) const {
  if (op.kind == OpKind::kGroupedGemm && op.batch == 0) return 0;  // no expert had tokens
  return checked_add(seconds_to_ticks(kernel_seconds(op)), us_to_ticks(gpu_.kernel_launch_us));
}

Tick ComputeCostModel::ops_time(std::span<const Op> ops) const {
  Tick t = 0;
  for (const auto& op : ops) t = checked_add(t, op_time(op));
  return t;
}

PlanExecutor::Hooks engine_hooks(const Cluster& cluster, const ComputeCostModel& cost) {
  return {[&cost](const Task&, std::span<const Op> ops) { return cost.ops_time(ops); },
          // Routes are composed on demand into one reused buffer: the executor hands each route to
          // the network, which copies it, before asking for the next.
          [&cluster, path = std::vector<LinkId>()](int src, int dst) mutable -> const std::vector<LinkId>& {
            cluster.route_into(src, dst, path);
            return path;
          }};
}

}  // namespace moesim
