#pragma once
// GPU datasheet numbers. Presets register themselves by name (see gpu_presets.cpp).
#include <array>
#include <string>

#include "core/registry.hpp"
#include "sim/work.hpp"

namespace moesim {

/// One GPU model as its datasheet describes it. Peak rates are dense (no sparsity).
struct GpuSpec {
  std::string name;
  std::array<double, kNumDTypes> peak_flops{};  ///< FLOP/s per DType; 0 = unsupported
  double hbm_bandwidth_Bps = 0.0;                ///< device memory bandwidth, bytes/s
  double memory_bytes = 0.0;                     ///< device memory capacity, bytes
  int pcie_gen = 4;                              ///< host interface generation (x16)
  int sm_count = 0;
  /// CUDA compute capability × 10 (70 Volta, 80 A100, 86/89 GeForce Ampere/Ada, 90 Hopper): picks
  /// NCCL's per-architecture tuning tables, NVLink rate and protocols (nccl_tuning). (GEMM tiles
  /// depend on the dtype, not on it: cost_model.)
  int compute_capability = 80;
  int copy_engines = 2;            ///< asynchronous copy engines usable concurrently
  double kernel_launch_us = 4.0;   ///< fixed cost per kernel launch

  double peak(DType t) const { return peak_flops[static_cast<int>(t)]; }
  bool supports(DType t) const { return peak(t) > 0.0; }
};

/// Registry of GPU presets ("A100-SXM4-80GB", ...).
Registry<GpuSpec>& gpu_presets();

/// Nominal per-direction bandwidth of a PCIe x16 link of generation `gen` (bytes/s).
double pcie_x16_bandwidth_Bps(int gen);

}  // namespace moesim
