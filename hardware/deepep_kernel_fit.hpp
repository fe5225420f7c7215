#pragma once
// DeepEP's dispatch and combine priced from measured tables (issue 47): the closed form of
// hardware/deepep.hpp with its fixed cost and its link and SM rates measured instead of taken
// from NCCL's and DeepEP's published figures, times a residual table.
//
//   t = overhead + max(NVLink bytes / (η_nv · NVLink rate), RDMA bytes / (η_rdma · NIC rate),
//                      counted bytes / (η_sm · SM rate)),  then × exp(residual(log tokens,
//                      log hidden·top-k, log EP ranks))
//
// The bytes and the nominal rates are deepep.cpp's (DeepEP's own message sizes and paths); the
// fit says how much of each rate the kernels reach and what a call costs before its first byte
// (notify, barriers, the launch). Keyed by kernel, op and whether the EP group spans nodes.
#include <string>

#include <yaml-cpp/yaml.h>

#include "hardware/gemm_kernel_fit.hpp"

namespace moesim {

/// One (kernel, op, scope) DeepEP fit on one GPU system.
struct DeepEpKernelFit {
  std::string kernel = "deepep-ll";  ///< "deepep-ll" or "deepep-normal"
  std::string op = "dispatch";       ///< "dispatch" or "combine"
  bool internode = false;            ///< fitted on EP groups spanning nodes
  std::string system;                ///< the GPU the table was measured on
  double overhead_us = 10.0;
  double nvlink_efficiency = 1.0;  ///< fraction of deepep.cpp's NVLink rate reached
  double rdma_efficiency = 1.0;    ///< fraction of its NIC rate
  double sm_efficiency = 1.0;      ///< fraction of its per-SM copy rate (normal kernels)
  ResidualGrid residual;           ///< axes: log tokens per rank, log hidden·top-k, log EP ranks
  int fitted_rows = 0;
  double fitted_median_error = 0.0;

  /// The residual factor at one call's shape.
  double residual_factor(double tokens, double hidden_topk, double ranks) const;

  YAML::Node to_yaml() const;
  /// Throws std::runtime_error naming the bad field.
  static DeepEpKernelFit from_yaml(const YAML::Node& node);
  /// "" when every parameter is physical; else what is not.
  std::string implausible() const;
};

}  // namespace moesim
