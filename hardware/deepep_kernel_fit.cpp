#include "hardware/deepep_kernel_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim {
namespace {

constexpr const char* kDeepEpAxes[3] = {"log_tokens", "log_hidden_topk", "log_ranks"};

}  // namespace

double DeepEpKernelFit::residual_factor(double tokens, double hidden_topk, double ranks) const {
  if (residual.empty()) return 1.0;
  return std::exp(residual.at(std::log(std::max(1.0, tokens)), std::log(std::max(1.0, hidden_topk)),
                              std::log(std::max(1.0, ranks))));
}

YAML::Node DeepEpKernelFit::to_yaml() const {
  YAML::Node e(YAML::NodeType::Map);
  e["kernel"] = kernel;
  e["op"] = op;
  e["internode"] = internode;
  e["system"] = system;
  e["overhead_us"] = overhead_us;
  e["nvlink_efficiency"] = nvlink_efficiency;
  e["rdma_efficiency"] = rdma_efficiency;
  e["sm_efficiency"] = sm_efficiency;
  e["fitted_rows"] = fitted_rows;
  e["fitted_median_error"] = fitted_median_error;
  if (!residual.empty()) e["residual"] = residual.to_yaml(kDeepEpAxes);
  return e;
}

DeepEpKernelFit DeepEpKernelFit::from_yaml(const YAML::Node& node) {
  if (!node.IsMap()) throw std::runtime_error("expected a map");
  DeepEpKernelFit f;
  f.kernel = node["kernel"].as<std::string>();
  if (f.kernel != "deepep-ll" && f.kernel != "deepep-normal")
    throw std::runtime_error("kernel must be deepep-ll or deepep-normal");
  f.op = node["op"].as<std::string>();
  if (f.op != "dispatch" && f.op != "combine") throw std::runtime_error("op must be dispatch or combine");
  f.internode = node["internode"] && node["internode"].as<bool>();
  f.system = node["system"] ? node["system"].as<std::string>() : "";
  f.overhead_us = node["overhead_us"].as<double>();
  f.nvlink_efficiency = node["nvlink_efficiency"].as<double>();
  f.rdma_efficiency = node["rdma_efficiency"].as<double>();
  f.sm_efficiency = node["sm_efficiency"].as<double>();
  f.fitted_rows = node["fitted_rows"] ? node["fitted_rows"].as<int>() : 0;
  f.fitted_median_error = node["fitted_median_error"] ? node["fitted_median_error"].as<double>() : 0.0;
  if (const auto r = node["residual"]) f.residual = ResidualGrid::from_yaml(r, kDeepEpAxes);
  return f;
}

std::string DeepEpKernelFit::implausible() const {
  const auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in(overhead_us, 0.0, 1e4)) return "overhead_us must be in [0, 10000]";
  for (double e : {nvlink_efficiency, rdma_efficiency, sm_efficiency})
    if (!in(e, 1e-3, 20.0)) return "efficiencies must be in [0.001, 20] (fractions of deepep.cpp's nominal rates)";
  return residual.implausible();
}

}  // namespace moesim
