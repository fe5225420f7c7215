#pragma once
// Compute cost: a roofline per op, t = max(flops / (peak · η_c(shape)), bytes / (hbm_bw · η_m))
// plus the kernel launch. η comes from datasheet-level default curves; a calibration profile
// (measured efficiency tables) replaces them where it has data.
#include <array>
#include <cstdint>
#include <string>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/registry.hpp"
#include "hardware/cluster.hpp"
#include "hardware/gpu_spec.hpp"
#include "hardware/host_cost.hpp"
#include "sim/plan_executor.hpp"
#include "sim/tick.hpp"
#include "sim/work.hpp"

namespace moesim {

/// Efficiency parameters of the default (uncalibrated) compute model.
struct ComputeEfficiency {
  double gemm_peak = 0.80;       ///< η_c of a large, tile-aligned GEMM (cuBLAS reaches ~75-85%)
  std::int64_t gemm_tile = 128;  ///< output tile edge: partial tiles waste their unused rows/cols
  bool gemm_waves = true;        ///< quantise tiles into waves over the SMs (sm_count > 0)
  double attention = 0.55;       ///< η_c of fused (flash) attention in prefill
  double memory = 0.85;          ///< η_m: achievable fraction of HBM bandwidth
  double elementwise_flops = 0.25;
  /// Time proportional to FLOPs at the peak efficiencies above: no memory-bound regime, no tile
  /// or k-loop losses (ClusterSpec::compute_model "flops-only").
  bool flops_only = false;
};

/// A compute model in the registry: what it changes in the default efficiencies.
struct ComputeModelInfo {
  std::function<void(ComputeEfficiency&)> apply;
};
/// The compute models (hardware.compute_model), each with a one-line description: "roofline"
/// and "flops-only" (MoE-GPS §5's saturated-compute assumption).
Registry<ComputeModelInfo>& compute_models();

/// The factors of a GEMM's default compute efficiency η_c = peak · use_m · use_n · k_loop · wave_use.
struct GemmEfficiencyParts {
  std::int64_t tile_m = 0, tile_n = 0;  ///< output tile edges chosen for m and n
  std::int64_t tile_k = 0;              ///< k depth of one main-loop iteration (dtype: 64 bytes of k)
  double use_m = 1.0, use_n = 1.0;      ///< useful fraction of the padded tiles
  double k_loop = 1.0;                  ///< main-loop fixed cost factor, min(1, 1.5 k / (k + 2 tile_k))
  std::int64_t tiles = 0;               ///< output tiles of the whole launch (all batches or groups)
  int split_k = 1;                      ///< k slices per tile when the tiles fill less than one wave
  std::int64_t waves = 0;               ///< rounds of one tile per SM the launch needs
  double wave_use = 1.0;                ///< busy fraction of the SMs over those waves
  double efficiency = 0.0;              ///< η_c
};

/// Prices already worked out by a ComputeCostModel, by shape (issue 27: a serving run prices the
/// same GEMM shapes every layer of every step). A cache, not state: a copy starts empty, so a
/// model copied into another thread shares nothing with the original. One model is used by one
/// run, on one thread.
class GemmPriceMemo {
 public:
  GemmPriceMemo() = default;
  GemmPriceMemo(const GemmPriceMemo&) {}
  GemmPriceMemo& operator=(const GemmPriceMemo&) { return *this; }

  /// One group of a grouped GEMM at efficiency without waves: its output tiles and its seconds.
  struct GroupTerm {
    std::int64_t tiles = -1;  ///< -1: not worked out yet
    double seconds = 0.0;
  };
  /// The group terms of (n, k, dtype), indexed by the group's rows m (below kMaxRows).
  std::vector<GroupTerm>& group_terms(std::int64_t n, std::int64_t k, DType dt);
  static constexpr std::int64_t kMaxRows = 1 << 14;
  /// Seconds of a GEMM launch by (m, n, k, batch, dtype); nullptr when not worked out yet.
  double* gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dt);
  void set_gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dt, double s);

 private:
  struct Shape {
    std::int64_t n, k;
    DType dt;
    std::vector<GroupTerm> terms;
  };
  struct Key {
    std::int64_t m, n, k, batch;
    DType dt;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& x) const {
      std::uint64_t h = 0x9E3779B97F4A7C15ULL;
      for (std::uint64_t v : {static_cast<std::uint64_t>(x.m), static_cast<std::uint64_t>(x.n),
                              static_cast<std::uint64_t>(x.k), static_cast<std::uint64_t>(x.batch),
                              static_cast<std::uint64_t>(x.dt)})
        h = (h ^ v) * 0x100000001B3ULL;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  std::vector<Shape> shapes_;
  std::unordered_map<Key, double, KeyHash> gemms_;
};

/// Prices ops on one GPU model. Never decides anything: policies choose the ops.
class ComputeCostModel {
 public:
  /// With a calibration, its GEMM tables and fitted efficiencies replace the defaults.
  explicit ComputeCostModel(GpuSpec gpu, ComputeEfficiency eff = {},
                            std::shared_ptr<const HardwareCalibration> calibration = nullptr);
  /// The cost model of a cluster's GPU, calibrated when the cluster is.
  static ComputeCostModel for_cluster(const ClusterSpec& spec);

  /// Kernel time of one op in seconds, without launch overhead.
  double kernel_seconds(const Op& op) const;
  /// Kernel time plus launch overhead, in ticks.
  Tick op_time(const Op& op) const;
  /// Sum of op_time over `ops` (ops on one stream run back to back).
  Tick ops_time(std::span<const Op> ops) const;
  /// The same with `launch_us` per kernel instead of the GPU's eager kernel_launch_us (kernels
  /// replayed from a CUDA graph).
  Tick ops_time(std::span<const Op> ops, double launch_us) const;
  /// η_c of a GEMM of this shape (tile and k-loop effects).
  double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k) const;
  /// η_c and its factors (`moesim cost gemm --explain`), for `batch` such GEMMs in one launch
  /// (their tiles share the waves), in `dt` (its k tile).
  GemmEfficiencyParts gemm_efficiency_parts(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1,
                                            DType dt = DType::kFp16) const;
  /// Wave quantisation of `tiles` output tiles of depth `k` (k tile `tile_k`) over the GPU's SMs,
  /// one tile per SM at a time; below one wave, split-K over k fills the idle SMs. Fills the
  /// tiles, split_k, waves and wave_use of `p`.
  void quantise_waves(std::int64_t tiles, std::int64_t k, GemmEfficiencyParts& p) const;
  /// The fitted kernels of `engine` ("trtllm", "sglang", "vllm") price GEMMs from now on, where
  /// the calibration has fits (HardwareCalibration::gemm_fit); "" or no fits: the roofline.
  /// With `fp8_block`, FP8 GEMMs are priced by the fp8-block family (DeepGEMM-class kernels).
  void select_kernels(const std::string& engine, bool fp8_block = false);
  /// The fit pricing a GEMM of compute dtype `dt`, or nullptr (roofline, or a measured curve).
  const GemmKernelFit* gemm_fit(DType dt) const;
  const GemmKernelFit* gemm_fit(GemmFamily f) const { return fits_[static_cast<int>(f)]; }
  /// The shape terms a kernel fit reads, for `op` (a GEMM or grouped GEMM).
  GemmTerms gemm_terms(const Op& op) const;
  /// Seconds of `op` by `fit` at this GPU's peak for the fit's family and its bandwidth.
  double fitted_seconds(const GemmKernelFit& fit, const Op& op, bool physics_only = false) const;
  /// The fit pricing an attention core op (kAttention), or nullptr (the roofline).
  const AttentionKernelFit* attention_fit(const Op& op) const;
  /// Seconds of attention core `op` by `fit` at this GPU's peak, bandwidth and SM count.
  double fitted_attention_seconds(const AttentionKernelFit& fit, const Op& op, bool physics_only = false) const;
  /// The engine whose kernels price GEMMs ("" = none selected).
  const std::string& kernel_engine() const { return kernel_engine_; }
  /// The measured efficiency curve the profile has for (dtype, n, k), if any.
  const EfficiencyCurve* measured_gemm_curve(DType dt, std::int64_t n, std::int64_t k) const {
    return calibration_ ? calibration_->gemm_curve(dt, n, k) : nullptr;
  }
  const GpuSpec& gpu() const { return gpu_; }
  const ComputeEfficiency& efficiency() const { return eff_; }
  /// The host beside the GPU: prices host work (policies' schedules, predictors, engine steps).
  const HostCostModel& host() const { return host_; }

 private:
  double peak(DType t) const;
  /// kernel_seconds under ComputeEfficiency::flops_only.
  double flops_only_seconds(const Op& op) const;
  /// Seconds of `batch` GEMMs of m rows in one launch, at compute efficiency from the profile or
  /// the default curve.
  double gemm_compute_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dt, std::int64_t batch) const;
  /// The uncalibrated grouped-GEMM price: each group at its tile and k-loop efficiency, all
  /// groups' tiles sharing the waves.
  /// `tiles_out`, when given, receives the launch's tiles and split-K (for gemm_terms).
  double grouped_gemm_seconds(const Op& op, GemmEfficiencyParts* tiles_out = nullptr) const;
  GpuSpec gpu_;
  std::string kernel_engine_;
  bool fp8_block_ = false;
  std::array<const GemmKernelFit*, kNumGemmFamilies> fits_{};
  /// Attention fits by [family][compute dtype][KV dtype], chosen once per select_kernels.
  std::array<const AttentionKernelFit*, kNumAttentionFamilies * kNumDTypes * kNumDTypes> attention_fits_{};
  ComputeEfficiency eff_;
  HostCostModel host_;
  std::shared_ptr<const HardwareCalibration> calibration_;
  mutable GemmPriceMemo memo_;
};

/// The engine's view of a cluster: compute tasks priced by `cost`, transfers routed by `cluster`.
/// Both must outlive the executor that uses the hooks.
PlanExecutor::Hooks engine_hooks(const Cluster& cluster, const ComputeCostModel& cost);

}  // namespace moesim
