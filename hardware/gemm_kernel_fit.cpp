#include "hardware/gemm_kernel_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim {

const char* gemm_family_name(GemmFamily f) {
  switch (f) {
    case GemmFamily::kBf16: return "bf16";
    case GemmFamily::kFp8: return "fp8";
    case GemmFamily::kFp8Block: return "fp8-block";
    case GemmFamily::kNvFp4: return "nvfp4";
  }
  return "?";
}

bool parse_gemm_family(const std::string& s, GemmFamily& out) {
  if (s == "bf16" || s == "bfloat16" || s == "fp16" || s == "float16") out = GemmFamily::kBf16;
  else if (s == "fp8") out = GemmFamily::kFp8;
  else if (s == "fp8-block" || s == "fp8_block") out = GemmFamily::kFp8Block;
  else if (s == "nvfp4" || s == "fp4") out = GemmFamily::kNvFp4;
  else return false;
  return true;
}

DType gemm_family_dtype(GemmFamily f) {
  switch (f) {
    case GemmFamily::kBf16: return DType::kBf16;
    case GemmFamily::kFp8:
    case GemmFamily::kFp8Block: return DType::kFp8;
    case GemmFamily::kNvFp4: return DType::kNvFp4;
  }
  return DType::kBf16;
}

bool default_gemm_family(DType dt, GemmFamily& out) {
  switch (dt) {
    case DType::kFp16:
    case DType::kBf16: out = GemmFamily::kBf16; return true;
    case DType::kFp8: out = GemmFamily::kFp8; return true;
    case DType::kNvFp4: out = GemmFamily::kNvFp4; return true;
    case DType::kFp32:
    case DType::kMxFp4:
    case DType::kInt4: return false;
  }
  return false;
}

namespace {

// Index of the cell holding v on `axis` and v's fraction across it, clamped to the axis.
std::pair<std::size_t, double> cell(const std::vector<double>& axis, double v) {
  if (axis.size() < 2 || v <= axis.front()) return {0, 0.0};
  if (v >= axis.back()) return {axis.size() - 2, 1.0};
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(axis.begin(), axis.end(), v) - axis.begin()) - 1;
  return {i, (v - axis[i]) / (axis[i + 1] - axis[i])};
}

}  // namespace

double ResidualGrid::at(double lm, double ln, double lk) const {
  if (value.empty()) return 0.0;
  const std::size_t nn = log_n.size(), nk = log_k.size();
  const auto [im, fm] = cell(log_m, lm);
  const auto [in, fn] = cell(log_n, ln);
  const auto [ik, fk] = cell(log_k, lk);
  // An axis of one value has no second corner: its weight stays on the first.
  const std::size_t dm = log_m.size() > 1 ? 1 : 0, dn = nn > 1 ? 1 : 0, dk = nk > 1 ? 1 : 0;
  double sum = 0.0;
  for (std::size_t a = 0; a <= dm; ++a)
    for (std::size_t b = 0; b <= dn; ++b)
      for (std::size_t c = 0; c <= dk; ++c) {
        const double w = (a ? fm : 1.0 - fm) * (b ? fn : 1.0 - fn) * (c ? fk : 1.0 - fk);
        if (w != 0.0) sum += w * value[((im + a) * nn + (in + b)) * nk + (ik + c)];
      }
  return sum;
}

double GemmKernelFit::seconds(const GemmTerms& t, double peak_flops, double hbm_Bps, bool physics_only) const {
  const double compute = t.flops / (peak_flops * compute_efficiency * t.shape_use);
  // Few busy SMs cannot pull the whole HBM bandwidth: a skinny GEMM's weight stream is capped by
  // the SMs its tiles occupy.
  const double bandwidth = std::min(hbm_Bps * memory_efficiency, std::max(1.0, t.active_sms) * sm_bandwidth_GBps * 1e9);
  const double memory = t.bytes / bandwidth;
  // (C^p + M^p)^(1/p), scaled by the larger term so that neither power overflows.
  const double big = std::max(compute, memory);
  double s = 0.0;
  if (big > 0.0) s = big * std::pow(std::pow(compute / big, blend) + std::pow(memory / big, blend), 1.0 / blend);
  s += overhead_us * 1e-6;
  if (quantises_activation) s += t.quant_bytes / (hbm_Bps * memory_efficiency);
  if (!physics_only) s *= std::exp(residual.at(t.log_m, t.log_n, t.log_k));
  return s;
}

namespace {

YAML::Node flow(const std::vector<double>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (double d : v) n.push_back(d);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

std::vector<double> doubles(const YAML::Node& n, const std::string& what) {
  if (!n || !n.IsSequence()) throw std::runtime_error(what + ": expected a list of numbers");
  std::vector<double> v;
  for (const auto& e : n) v.push_back(e.as<double>());
  return v;
}

}  // namespace

constexpr const char* kGemmAxes[3] = {"log_m", "log_n", "log_k"};

YAML::Node ResidualGrid::to_yaml(const char* const (&axes)[3]) const {
  YAML::Node r(YAML::NodeType::Map);
  r[axes[0]] = flow(log_m);
  r[axes[1]] = flow(log_n);
  r[axes[2]] = flow(log_k);
  r["value"] = flow(value);
  return r;
}

ResidualGrid ResidualGrid::from_yaml(const YAML::Node& r, const char* const (&axes)[3]) {
  ResidualGrid g;
  g.log_m = doubles(r[axes[0]], std::string("residual.") + axes[0]);
  g.log_n = doubles(r[axes[1]], std::string("residual.") + axes[1]);
  g.log_k = doubles(r[axes[2]], std::string("residual.") + axes[2]);
  g.value = doubles(r["value"], "residual.value");
  for (const auto* axis : {&g.log_m, &g.log_n, &g.log_k}) {
    if (axis->empty()) throw std::runtime_error("residual: an axis is empty");
    for (std::size_t i = 1; i < axis->size(); ++i)
      if (!((*axis)[i] > (*axis)[i - 1])) throw std::runtime_error("residual: axis values must increase");
  }
  if (g.value.size() != g.log_m.size() * g.log_n.size() * g.log_k.size())
    throw std::runtime_error("residual: value must hold one number per grid point");
  return g;
}

std::string ResidualGrid::implausible() const {
  const auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  // A residual of e^±5 (150x) is no correction but a different kernel: refuse it.
  for (double v : value)
    if (!in(v, -5.0, 5.0)) return "residual values must be in [-5, 5] (log of measured / physics)";
  for (const auto* axis : {&log_m, &log_n, &log_k})
    for (double v : *axis)
      if (!in(v, 0.0, 50.0)) return "residual axes are logs of sizes in [1, e^50]";
  return "";
}

YAML::Node GemmKernelFit::to_yaml() const {
  YAML::Node e(YAML::NodeType::Map);
  e["engine"] = engine;
  e["family"] = gemm_family_name(family);
  e["kernel_source"] = kernel_source;
  e["system"] = system;
  e["compute_efficiency"] = compute_efficiency;
  e["memory_efficiency"] = memory_efficiency;
  e["sm_bandwidth_GBps"] = sm_bandwidth_GBps;
  e["overhead_us"] = overhead_us;
  e["blend"] = blend;
  e["quantises_activation"] = quantises_activation;
  e["fitted_rows"] = fitted_rows;
  e["fitted_median_error"] = fitted_median_error;
  if (!residual.empty()) e["residual"] = residual.to_yaml(kGemmAxes);
  return e;
}

GemmKernelFit GemmKernelFit::from_yaml(const YAML::Node& node) {
  if (!node.IsMap()) throw std::runtime_error("expected a map");
  GemmKernelFit f;
  f.engine = node["engine"].as<std::string>();
  if (!parse_gemm_family(node["family"].as<std::string>(), f.family))
    throw std::runtime_error("family must be one of bf16, fp8, fp8-block, nvfp4");
  f.kernel_source = node["kernel_source"] ? node["kernel_source"].as<std::string>() : "";
  f.system = node["system"] ? node["system"].as<std::string>() : "";
  f.compute_efficiency = node["compute_efficiency"].as<double>();
  f.memory_efficiency = node["memory_efficiency"].as<double>();
  f.sm_bandwidth_GBps = node["sm_bandwidth_GBps"].as<double>();
  f.overhead_us = node["overhead_us"].as<double>();
  f.blend = node["blend"].as<double>();
  f.quantises_activation = node["quantises_activation"] && node["quantises_activation"].as<bool>();
  f.fitted_rows = node["fitted_rows"] ? node["fitted_rows"].as<int>() : 0;
  f.fitted_median_error = node["fitted_median_error"] ? node["fitted_median_error"].as<double>() : 0.0;
  if (const auto r = node["residual"]) f.residual = ResidualGrid::from_yaml(r, kGemmAxes);
  return f;
}

std::string GemmKernelFit::implausible() const {
  const auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in(compute_efficiency, 1e-3, 1.5)) return "compute_efficiency must be in [0.001, 1.5]";
  if (!in(memory_efficiency, 1e-3, 1.5)) return "memory_efficiency must be in [0.001, 1.5]";
  if (!in(sm_bandwidth_GBps, 0.1, 1e5)) return "sm_bandwidth_GBps must be in [0.1, 100000]";
  if (!in(overhead_us, 0.0, 1e4)) return "overhead_us must be in [0, 10000]";
  if (!in(blend, 1.0, 64.0)) return "blend must be in [1, 64]";
  return residual.implausible();
}

}  // namespace moesim
