#pragma once
// A GEMM kernel family's cost, fitted to measured kernel tables (issue 47): the roofline of
// cost_model.hpp with its efficiencies measured instead of assumed, plus a table of what the
// physics misses at each measured shape (the kernel library's tile and algorithm choices).
//
//   t(m, n, k) = overhead + (C^p + M^p)^(1/p) + Q,  then × exp(residual(log m, log n, log k))
//   C = 2mnk / (peak · η · s(m, n, k))     s: tile, k-loop and wave use (ComputeCostModel)
//   M = bytes / min(hbm_bw · β, active_SMs · sm_bw)
//   Q = quantising the activation (m·k bf16 read, fp8 written) at hbm_bw · β, for kernels whose
//       measured time includes it (TensorRT-LLM's per-tensor FP8 path)
//
// The parameters are physical, so the fit transfers to a GPU without tables at that GPU's own
// peaks, bandwidth and SM count (docs/calibration.md, "transfer rule"); the residual table is a
// property of the kernel library on that architecture and travels with it.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/work.hpp"

namespace moesim {

/// Which kernels a GEMM runs: the dtype of its operands and, for FP8, the scaling granularity.
enum class GemmFamily { kBf16 = 0, kFp8 = 1, kFp8Block = 2, kNvFp4 = 3 };
inline constexpr int kNumGemmFamilies = 4;
/// "bf16", "fp8" (per-tensor scales), "fp8-block" (128-element block scales), "nvfp4".
const char* gemm_family_name(GemmFamily f);
/// Parses gemm_family_name's names and the kernel tables' `gemm_dtype` spellings
/// ("bfloat16", "fp8_block"); false on an unknown name.
bool parse_gemm_family(const std::string& s, GemmFamily& out);
/// The tensor-core dtype whose datasheet peak a family runs at.
DType gemm_family_dtype(GemmFamily f);
/// The family a GEMM of compute dtype `dt` runs when nothing says otherwise (fp16 and bf16 run
/// the bf16 kernels; fp32 has none).
bool default_gemm_family(DType dt, GemmFamily& out);

/// The parts of a GEMM the fitted formula reads: worked out from the shape and the GPU alone.
struct GemmTerms {
  double flops = 0.0;
  double bytes = 0.0;          ///< A and B in the operand dtype, C in bf16
  double shape_use = 1.0;      ///< s: tile, k-loop and wave use of the SMs (0, 1]
  double active_sms = 0.0;     ///< SMs the launch keeps busy (tiles × split-K, at most the GPU's)
  double quant_bytes = 0.0;    ///< the activation's quantisation pass: 3 bytes per element of A
  double log_m = 0.0, log_n = 0.0, log_k = 0.0;
};

/// log(measured / physics) on a grid of (log m, log n, log k), interpolated trilinearly and
/// clamped at the edges: the kernel library's choices the physics does not see.
struct ResidualGrid {
  std::vector<double> log_m, log_n, log_k;  ///< increasing
  std::vector<double> value;                ///< [i_m][i_n][i_k], row-major
  bool empty() const { return value.empty(); }
  double at(double lm, double ln, double lk) const;
  /// A map of the three axes, named `axes`, and `value` (numbers in flow style).
  YAML::Node to_yaml(const char* const (&axes)[3]) const;
  /// Reads to_yaml's map; throws std::runtime_error naming what is wrong.
  static ResidualGrid from_yaml(const YAML::Node& node, const char* const (&axes)[3]);
  /// "" when the values are corrections (|log| ≤ 5) on axes of logs of sizes in [1, e^50].
  std::string implausible() const;
};

/// One (engine, family) kernel fit on one GPU.
struct GemmKernelFit {
  std::string engine;         ///< "trtllm", "sglang", "vllm"
  GemmFamily family = GemmFamily::kBf16;
  std::string kernel_source;  ///< the kernel the table timed (e.g. "DeepGemmFp8BlockScaledMMKernel")
  std::string system;         ///< the GPU the table was measured on ("h100_sxm")
  double compute_efficiency = 0.8;  ///< η: fraction of the datasheet peak on the plateau
  double memory_efficiency = 0.8;   ///< β: fraction of HBM bandwidth a streaming kernel reaches
  double sm_bandwidth_GBps = 1000;  ///< what one busy SM can pull from memory
  double overhead_us = 3.0;         ///< launch-to-first-tile and epilogue, per launch
  double blend = 3.0;               ///< p ≥ 1: how sharply compute and memory overlap
  bool quantises_activation = false;
  ResidualGrid residual;
  /// Rows the parameters were fitted to, and their median |error| (for --explain).
  int fitted_rows = 0;
  double fitted_median_error = 0.0;

  /// Seconds of one launch over `t`, on a GPU of peak `peak_flops` (the family's dtype) and
  /// memory bandwidth `hbm_Bps`; with the residual table unless `physics_only`.
  double seconds(const GemmTerms& t, double peak_flops, double hbm_Bps, bool physics_only = false) const;

  YAML::Node to_yaml() const;
  /// Throws std::runtime_error naming the bad field.
  static GemmKernelFit from_yaml(const YAML::Node& node);
  /// "" when every parameter is physical; else what is not.
  std::string implausible() const;
};

}  // namespace moesim
