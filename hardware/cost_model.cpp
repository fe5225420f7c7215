#include "hardware/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim {

std::vector<GemmPriceMemo::GroupTerm>& GemmPriceMemo::group_terms(std::int64_t n, std::int64_t k, DType dt) {
  for (Shape& s : shapes_)
    if (s.n == n && s.k == k && s.dt == dt) return s.terms;
  shapes_.push_back(Shape{n, k, dt, {}});
  return shapes_.back().terms;
}

double* GemmPriceMemo::gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dt) {
  const auto it = gemms_.find(Key{m, n, k, batch, dt});
  return it == gemms_.end() ? nullptr : &it->second;
}

void GemmPriceMemo::set_gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dt,
                                     double s) {
  // Bounded: a run has a few hundred shapes; a pathological one stops caching rather than growing.
  if (gemms_.size() < (1u << 16)) gemms_.emplace(Key{m, n, k, batch, dt}, s);
}

ComputeCostModel::ComputeCostModel(GpuSpec gpu, ComputeEfficiency eff,
                                   std::shared_ptr<const HardwareCalibration> calibration)
    : gpu_(std::move(gpu)), eff_(eff), calibration_(std::move(calibration)) {
  if (calibration_) {
    if (calibration_->gemm_peak) eff_.gemm_peak = *calibration_->gemm_peak;
    if (calibration_->memory_efficiency) eff_.memory = *calibration_->memory_efficiency;
  }
  select_kernels("trtllm");
}

void ComputeCostModel::select_kernels(const std::string& engine, bool fp8_block) {
  kernel_engine_ = engine;
  fp8_block_ = fp8_block;
  for (int f = 0; f < kNumGemmFamilies; ++f)
    fits_[static_cast<std::size_t>(f)] =
        calibration_ && !engine.empty() ? calibration_->gemm_fit(engine, static_cast<GemmFamily>(f)) : nullptr;
  std::size_t i = 0;
  for (int f = 0; f < kNumAttentionFamilies; ++f)
    for (int c = 0; c < kNumDTypes; ++c)
      for (int kv = 0; kv < kNumDTypes; ++kv)
        attention_fits_[i++] = calibration_ && !engine.empty()
                                   ? calibration_->attention_fit(engine, static_cast<AttentionFamily>(f),
                                                                 static_cast<DType>(c), static_cast<DType>(kv))
                                   : nullptr;
  memo_ = GemmPriceMemo();  // prices of the previous kernels are stale
}

const GemmKernelFit* ComputeCostModel::gemm_fit(DType dt) const {
  GemmFamily f;
  if (!default_gemm_family(dt, f)) return nullptr;
  if (f == GemmFamily::kFp8 && fp8_block_) f = GemmFamily::kFp8Block;
  return fits_[static_cast<std::size_t>(f)];
}

const AttentionKernelFit* ComputeCostModel::attention_fit(const Op& op) const {
  // No kernel table times Gated DeltaNet or DSA's indexer: they are priced at the roofline.
  if (op.attention == AttentionForm::kLinear || op.attention == AttentionForm::kIndexer) return nullptr;
  const auto f = static_cast<std::size_t>(attention_family_of(op));
  const auto c = static_cast<std::size_t>(op.dtype), kv = static_cast<std::size_t>(op.kv_dtype);
  return attention_fits_[(f * kNumDTypes + c) * kNumDTypes + kv];
}

double ComputeCostModel::fitted_attention_seconds(const AttentionKernelFit& fit, const Op& op, bool physics_only) const {
  // The fit's own math type sets the peak: TensorRT-LLM's decode and MLA kernels compute in
  // bf16 whatever the model's GEMMs run in.
  return fit.seconds(AttentionTerms::of(op), peak(fit.compute_dtype), gpu_.hbm_bandwidth_Bps, gpu_.sm_count,
                     physics_only);
}

GemmTerms ComputeCostModel::gemm_terms(const Op& op) const {
  GemmTerms t;
  t.flops = op.flops;
  t.bytes = op.bytes;
  std::int64_t rows = op.m;
  GemmEfficiencyParts parts;
  if (op.kind == OpKind::kGroupedGemm) {
    // The grouped launch's roofline compute time at peak η_c gives its shape use: the groups'
    // padded tiles and the waves they share.
    const double padded = grouped_gemm_seconds(op, &parts);
    t.shape_use = padded > 0.0 ? op.flops / (peak(op.dtype) * eff_.gemm_peak * padded) : 1.0;
    rows = 0;
    std::int64_t groups = 0;
    for (auto m : op.group_m)
      if (m > 0) rows += m, ++groups;
    // The residual is read at the mean group's rows: each group is a GEMM of about that size.
    t.log_m = std::log(std::max(1.0, static_cast<double>(rows) / static_cast<double>(std::max<std::int64_t>(1, groups))));
  } else {
    parts = gemm_efficiency_parts(op.m, op.n, op.k, std::max<std::int64_t>(1, op.batch), op.dtype);
    t.shape_use = parts.efficiency / eff_.gemm_peak;
    t.log_m = std::log(static_cast<double>(std::max<std::int64_t>(1, op.m)));
    rows = op.m * std::max<std::int64_t>(1, op.batch);
  }
  t.active_sms = static_cast<double>(std::min<std::int64_t>(parts.tiles * parts.split_k, std::max(1, gpu_.sm_count)));
  t.quant_bytes = 3.0 * static_cast<double>(rows) * static_cast<double>(op.k);
  t.log_n = std::log(static_cast<double>(std::max<std::int64_t>(1, op.n)));
  t.log_k = std::log(static_cast<double>(std::max<std::int64_t>(1, op.k)));
  return t;
}

double ComputeCostModel::fitted_seconds(const GemmKernelFit& fit, const Op& op, bool physics_only) const {
  return fit.seconds(gemm_terms(op), peak(gemm_family_dtype(fit.family)), gpu_.hbm_bandwidth_Bps, physics_only);
}

Registry<ComputeModelInfo>& compute_models() {
  static Registry<ComputeModelInfo> r = [] {
    Registry<ComputeModelInfo> reg("compute model");
    reg.add("roofline",
            "the slower of a kernel's FLOPs (with tile, k-loop and wave losses) and its memory traffic, plus launch",
            {[](ComputeEfficiency&) {}});
    reg.add("flops-only",
            "time proportional to FLOPs at peak efficiency, no memory-bound regime (MoE-GPS §5: the simulator "
            "'assumes ... compute is saturated')",
            {[](ComputeEfficiency& e) { e.flops_only = true; }});
    return reg;
  }();
  return r;
}

ComputeCostModel ComputeCostModel::for_cluster(const ClusterSpec& spec) {
  ComputeEfficiency eff;
  compute_models().get(spec.compute_model).value.apply(eff);
  ComputeCostModel model(spec.gpu, eff, spec.calibration);
  model.select_kernels(spec.kernel_engine, spec.fp8_block_scales);
  // A profile's measured host speed replaces the preset's.
  const bool measured = spec.calibration && spec.calibration->host_speed;
  model.host_ = HostCostModel(measured ? *spec.calibration->host_speed : spec.host_speed);
  return model;
}

double ComputeCostModel::gemm_compute_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dt,
                                              std::int64_t batch) const {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (calibration_) {
    // A measured curve already contains the memory-bound regime: it is the whole kernel time.
    if (const EfficiencyCurve* c = calibration_->gemm_curve(dt, n, k))
      return static_cast<double>(batch) * flops / (peak(dt) * c->at(static_cast<double>(m)));
  }
  if (const double* s = memo_.gemm_seconds(m, n, k, batch, dt)) return *s;
  const double s = static_cast<double>(batch) * flops / (peak(dt) * gemm_efficiency_parts(m, n, k, batch, dt).efficiency);
  memo_.set_gemm_seconds(m, n, k, batch, dt, s);
  return s;
}

namespace {

// The k depth of one main-loop iteration: 64 bytes of k per row for tensor-core tiles (CUTLASS's
// sm80 defaults: 32 halves, 64 fp8 elements on sm89/sm90), 8 for fp32 SIMT (CUTLASS's default
// 128x128x8 threadblock).
std::int64_t tile_k_of(DType dt) {
  switch (dt) {
    case DType::kFp32: return 8;
    case DType::kFp8: return 64;
    case DType::kNvFp4:
    case DType::kMxFp4:
    case DType::kInt4: return 128;
    default: return 32;
  }
}

}  // namespace

void ComputeCostModel::quantise_waves(std::int64_t tiles, std::int64_t k, GemmEfficiencyParts& p) const {
  p.tiles = tiles;
  p.split_k = 1;
  const std::int64_t slots = gpu_.sm_count;
  if (!eff_.gemm_waves || slots <= 0 || tiles <= 0) {
    p.waves = tiles > 0 ? 1 : 0;
    p.wave_use = 1.0;
    return;
  }
  // Fewer tiles than SMs: cuBLAS splits k so that idle SMs share the tiles (split-K), keeping at
  // least four main-loop iterations per slice.
  if (tiles < slots) {
    const std::int64_t by_k = std::max<std::int64_t>(1, k / (4 * std::max<std::int64_t>(1, p.tile_k)));
    p.split_k = static_cast<int>(std::min<std::int64_t>({slots / tiles, by_k, 64}));
  }
  const std::int64_t units = tiles * p.split_k;
  p.waves = (units + slots - 1) / slots;
  p.wave_use = static_cast<double>(units) / static_cast<double>(p.waves * slots);
}

double ComputeCostModel::flops_only_seconds(const Op& op) const {
  switch (op.kind) {
    case OpKind::kGemm:
    case OpKind::kGroupedGemm: return op.flops / (peak(op.dtype) * eff_.gemm_peak);
    case OpKind::kAttention: return op.flops / (peak(op.dtype) * eff_.attention);
    case OpKind::kElementwise: return op.flops / (peak(DType::kFp32) * eff_.elementwise_flops);
    case OpKind::kHost: throw std::logic_error("host work is not a kernel: HostCostModel prices it");
  }
  return 0.0;
}

double ComputeCostModel::peak(DType t) const {
  double p = gpu_.peak(t);
  // Quantised types without tensor cores of their own are dequantised in the kernel and run at
  // the next wider type's peak (weight-only kernels, e.g. Marlin's W4A16/W8A16): fp4 at fp8 or
  // fp16, fp8 at fp16. Other types without tensor-core support run at the fp32 rate (bf16 on
  // V100 is emulated).
  if (p <= 0.0 && is_fp4(t)) p = gpu_.peak(DType::kFp8);
  if (p <= 0.0 && (is_fp4(t) || t == DType::kFp8 || t == DType::kInt4)) p = gpu_.peak(DType::kFp16);
  if (p <= 0.0) p = gpu_.peak(DType::kFp32);
  if (p <= 0.0) throw std::invalid_argument("GPU " + gpu_.name + " has no usable peak FLOP/s");
  return p;
}

double ComputeCostModel::gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k) const {
  return gemm_efficiency_parts(m, n, k).efficiency;
}

GemmEfficiencyParts ComputeCostModel::gemm_efficiency_parts(std::int64_t m, std::int64_t n, std::int64_t k,
                                                            std::int64_t batch, DType dt) const {
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
  p.tile_k = tile_k_of(dt);
  p.use_m = use(m, p.tile_m);
  p.use_n = use(n, p.tile_n);
  // The main loop's prologue and epilogue cost about two k tiles: η_c halves at k = 2 tile_k.
  const double kd = static_cast<double>(k);
  p.k_loop = std::min(1.0, kd / (kd + 2.0 * static_cast<double>(p.tile_k)) * 1.5);
  quantise_waves((m + p.tile_m - 1) / p.tile_m * ((n + p.tile_n - 1) / p.tile_n) * std::max<std::int64_t>(1, batch), k,
                 p);
  p.efficiency = eff_.gemm_peak * p.use_m * p.use_n * p.k_loop * p.wave_use;
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
      if (!measured)
        if (const GemmKernelFit* fit = gemm_fit(op.dtype)) {
          const std::int64_t batch = std::max<std::int64_t>(1, op.batch);
          if (const double* s = memo_.gemm_seconds(op.m, op.n, op.k, batch, op.dtype)) return *s;
          const double s = fitted_seconds(*fit, op);
          memo_.set_gemm_seconds(op.m, op.n, op.k, batch, op.dtype, s);
          return s;
        }
      // A batched GEMM is one launch: its batches' tiles share the waves.
      compute_s = gemm_compute_seconds(op.m, op.n, op.k, op.dtype, std::max<std::int64_t>(1, op.batch));
      if (measured) return compute_s;
      break;
    }
    case OpKind::kGroupedGemm: {
      // One kernel over all groups (an expert FFN's grouped GEMM): each group's rows are padded to
      // its own tiles, and all groups' tiles share the waves over the SMs.
      const bool measured = calibration_ && calibration_->gemm_curve(op.dtype, op.n, op.k);
      if (!measured)
        if (const GemmKernelFit* fit = gemm_fit(op.dtype)) return fitted_seconds(*fit, op);
      if (measured) {
        for (auto m : op.group_m)
          if (m > 0) compute_s += gemm_compute_seconds(m, op.n, op.k, op.dtype, 1);
        return compute_s;
      }
      compute_s = grouped_gemm_seconds(op);
      break;
    }
    case OpKind::kAttention:
      if (const AttentionKernelFit* fit = attention_fit(op)) return fitted_attention_seconds(*fit, op);
      compute_s = op.flops / (peak(op.dtype) * eff_.attention);
      break;
    case OpKind::kElementwise:
      compute_s = op.flops / (peak(DType::kFp32) * eff_.elementwise_flops);
      break;
    case OpKind::kHost:
      throw std::logic_error("host work is not a kernel: HostCostModel prices it");
  }
  return std::max(compute_s, mem_s);
}

double ComputeCostModel::grouped_gemm_seconds(const Op& op, GemmEfficiencyParts* tiles_out) const {
  // A group's term depends only on its m for the op's (n, k, dtype): worked out once per run
  // (the same expression, so the same bits, as pricing it afresh).
  std::vector<GemmPriceMemo::GroupTerm>& terms = memo_.group_terms(op.n, op.k, op.dtype);
  std::int64_t tiles = 0;
  double padded_seconds = 0.0;  // the groups at tile, k-loop and peak efficiency, no waves
  for (auto m : op.group_m) {
    if (m <= 0) continue;
    GemmPriceMemo::GroupTerm term;
    if (m < GemmPriceMemo::kMaxRows && static_cast<std::size_t>(m) < terms.size() && terms[static_cast<std::size_t>(m)].tiles >= 0) {
      term = terms[static_cast<std::size_t>(m)];
    } else {
      const GemmEfficiencyParts g = gemm_efficiency_parts(m, op.n, op.k, 1, op.dtype);
      term.tiles = g.tiles;
      term.seconds = 2.0 * static_cast<double>(m) * static_cast<double>(op.n) * static_cast<double>(op.k) /
                     (peak(op.dtype) * eff_.gemm_peak * g.use_m * g.use_n * g.k_loop);
      if (m < GemmPriceMemo::kMaxRows) {
        if (terms.size() <= static_cast<std::size_t>(m)) terms.resize(static_cast<std::size_t>(m) + 1);
        terms[static_cast<std::size_t>(m)] = term;
      }
    }
    tiles += term.tiles;
    padded_seconds += term.seconds;
  }
  GemmEfficiencyParts all;
  all.tile_k = tile_k_of(op.dtype);
  quantise_waves(tiles, op.k, all);
  if (tiles_out) *tiles_out = all;
  return padded_seconds / all.wave_use;
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

Tick ComputeCostModel::ops_time(std::span<const Op> ops, double launch_us) const {
  Tick t = 0;
  const Tick launch = us_to_ticks(launch_us);
  for (const auto& op : ops) {
    if (op.kind == OpKind::kGroupedGemm && op.batch == 0) continue;  // no expert had tokens
    t = checked_add(t, checked_add(seconds_to_ticks(kernel_seconds(op)), launch));
  }
  return t;
}

PlanExecutor::Hooks engine_hooks(const Cluster& cluster, const ComputeCostModel& cost) {
  return {[&cost](const Task&, std::span<const Op> ops) { return cost.ops_time(ops); },
          // Routes are composed on demand into one reused buffer: the executor hands each route to
          // the network, which copies it, before asking for the next.
          [&cluster, path = std::vector<LinkId>()](int src, int dst) mutable -> const std::vector<LinkId>& {
            cluster.route_into(src, dst, path);
            return path;
          },
          [&cost](const Task&, std::span<const Op> ops) { return cost.host().time(ops); }};
}

}  // namespace moesim
