#pragma once
// A hardware calibration profile: measured efficiencies that replace datasheet defaults wherever
// they have data. Written by `moesim calibrate fit`, read by scenarios
// (`hardware: {preset: ..., calibration: PROFILE.yaml}`) and by `moesim cost --calibration`.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hardware/attention_kernel_fit.hpp"
#include "hardware/deepep_kernel_fit.hpp"
#include "hardware/gemm_kernel_fit.hpp"
#include "sim/work.hpp"

namespace moesim {

/// y(x) > 0 sampled at increasing x, interpolated as a power law (linearly in log x, log y) and
/// clamped at both ends: efficiencies vary smoothly with the logarithm of sizes.
struct EfficiencyCurve {
  std::vector<double> x;
  std::vector<double> y;
  double at(double v) const;
  bool empty() const { return x.empty(); }
};

/// Where a collective's GPUs are: all in one node, or spread over nodes.
enum class CollectiveScope { kIntraNode, kInterNode };

/// Calibration of one collective kind at one scale: a fixed launch cost and, per message size,
/// the fraction of link bandwidth the collective achieves (protocol and kernel efficiency).
struct CollectiveCalibration {
  double launch_us = 0.0;
  /// The launch cost includes every hop (one-shot kernels that read all peers at once: the
  /// engines' custom all-reduce); the flows then pay no per-step hop latency.
  bool hops_in_launch = false;
  EfficiencyCurve efficiency;  ///< x = per-GPU buffer bytes, y = achieved fraction of line rate
};

/// A fitted host link (cudaMemcpy class): latency + bytes / bandwidth.
struct LinkFit {
  double latency_us = 0.0;
  double bandwidth_GBps = 0.0;
};

/// Everything a profile can calibrate. Empty parts leave the defaults in force.
struct HardwareCalibration {
  std::string base;      ///< the preset the profile was fitted against
  std::string device;    ///< the GPU the measurements came from
  double holdout = 0.0;  ///< fraction of samples kept out of the fit (for `calibrate report`)
  std::optional<double> gemm_peak;          ///< fitted η_c of the default curve (shapes without a table)
  std::optional<double> memory_efficiency;  ///< fitted η_m
  /// The host's speed relative to the reference hosts of host work (hardware/host_cost.hpp),
  /// measured; replaces the preset's host_speed. YAML: `host: {speed: x}`.
  std::optional<double> host_speed;
  /// GEMM efficiency η_c = flops / (peak · t) as a function of m, per (dtype, n, k).
  std::map<std::tuple<DType, std::int64_t, std::int64_t>, EfficiencyCurve> gemm;
  /// Per (collective name, scope), per GPU count.
  std::map<std::pair<std::string, CollectiveScope>, std::map<int, CollectiveCalibration>> collectives;
  std::map<std::string, LinkFit> links;  ///< "h2d_pinned", "d2h_pinned", "p2p", ...
  /// GEMM kernel fits per (engine, family) from kernel tables (gemm_kernel_fit.hpp). Where a
  /// shape has a measured curve in `gemm`, the curve wins.
  std::vector<GemmKernelFit> gemm_fits;

  /// The fit of `engine`'s kernels for `family`; when that engine has none, the first engine's
  /// that has (an engine's GEMMs are the same cuBLAS/CUTLASS/DeepGEMM kernels as another's more
  /// often than not, and far closer than the datasheet); nullptr when no engine has one.
  const GemmKernelFit* gemm_fit(const std::string& engine, GemmFamily family) const;
  /// Attention kernel fits per (engine, family, compute dtype, KV dtype) from kernel tables.
  std::vector<AttentionKernelFit> attention_fits;
  /// The fit for `family` with `kv` cache elements and `compute` math, preferring `engine`'s:
  /// the exact dtypes first, then the same KV dtype (a kernel's KV stream is what decode pays
  /// for), then any; nullptr when the family has none. The tables time TensorRT-LLM's kernels
  /// only, so every engine reads those (FlashInfer's and FlashMLA's are their peers on Hopper).
  const AttentionKernelFit* attention_fit(const std::string& engine, AttentionFamily family, DType compute,
                                          DType kv) const;
  /// DeepEP dispatch/combine fits per (kernel, op, scope) from DeepEP's tables.
  std::vector<DeepEpKernelFit> deepep_fits;
  /// The fit of `kernel` ("deepep-ll", "deepep-normal") for `op` ("dispatch", "combine") over an EP
  /// group within one node or across nodes; the other scope's when that one has none (the
  /// fixed cost and the NVLink rate carry over; an RDMA rate fitted within a node is NCCL's
  /// figure unchanged); nullptr when the kernel has none.
  const DeepEpKernelFit* deepep_fit(const std::string& kernel, const std::string& op, bool internode) const;

  /// The curve for (dtype, n, k), or nullptr.
  const EfficiencyCurve* gemm_curve(DType dt, std::int64_t n, std::int64_t k) const;
  /// The calibration for `op` at `scope` with the GPU count nearest to `gpus`, or nullptr.
  const CollectiveCalibration* collective(const std::string& op, CollectiveScope scope, int gpus) const;

  YAML::Node to_yaml() const;
  /// Parses a profile; throws std::runtime_error naming the bad field.
  static HardwareCalibration from_yaml(const YAML::Node& node);
};

/// Loads a profile file; throws InputError at `path` (and the YAML position) when invalid.
HardwareCalibration load_calibration(const std::string& path);

}  // namespace moesim
