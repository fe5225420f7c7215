#include "hardware/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/diagnostics.hpp"
#include "core/yaml_input.hpp"

namespace moesim {

double EfficiencyCurve::at(double v) const {
  if (x.empty()) return 1.0;
  if (v <= x.front()) return y.front();
  if (v >= x.back()) return y.back();
  const auto it = std::upper_bound(x.begin(), x.end(), v);
  const std::size_t i = static_cast<std::size_t>(it - x.begin());
  const double l0 = std::log(x[i - 1]), l1 = std::log(x[i]);
  const double f = (std::log(v) - l0) / (l1 - l0);
  // Power-law between points: exact where efficiency grows in proportion to the size (the
  // memory-bound and latency-bound regimes) and where it is flat.
  return std::exp(std::log(y[i - 1]) + f * (std::log(y[i]) - std::log(y[i - 1])));
}

const EfficiencyCurve* HardwareCalibration::gemm_curve(DType dt, std::int64_t n, std::int64_t k) const {
  const auto it = gemm.find({dt, n, k});
  return it == gemm.end() ? nullptr : &it->second;
}

const GemmKernelFit* HardwareCalibration::gemm_fit(const std::string& engine, GemmFamily family) const {
  const GemmKernelFit* any = nullptr;
  for (const GemmKernelFit& f : gemm_fits) {
    if (f.family != family) continue;
    if (f.engine == engine) return &f;
    if (!any) any = &f;
  }
  return any;
}

const AttentionKernelFit* HardwareCalibration::attention_fit(const std::string& engine, AttentionFamily family,
                                                             DType compute, DType kv) const {
  // Rank: family must match; then engine, KV dtype and compute dtype, in that order of weight
  // below the dtypes (an engine's own kernel at other dtypes is a worse guess than another's).
  const AttentionKernelFit* best = nullptr;
  int best_rank = -1;
  const auto wide = [](DType d) { return d == DType::kFp16 ? DType::kBf16 : d; };
  for (const AttentionKernelFit& f : attention_fits) {
    if (f.family != family) continue;
    const int rank = (wide(f.kv_dtype) == wide(kv) ? 4 : 0) + (wide(f.compute_dtype) == wide(compute) ? 2 : 0) +
                     (f.engine == engine ? 1 : 0);
    if (rank > best_rank) best = &f, best_rank = rank;
  }
  return best;
}

const DeepEpKernelFit* HardwareCalibration::deepep_fit(const std::string& kernel, const std::string& op,
                                                       bool internode) const {
  const DeepEpKernelFit* other = nullptr;
  for (const DeepEpKernelFit& f : deepep_fits) {
    if (f.kernel != kernel || f.op != op) continue;
    if (f.internode == internode) return &f;
    if (!other) other = &f;
  }
  return other;
}

const CollectiveCalibration* HardwareCalibration::collective(const std::string& op, CollectiveScope scope,
                                                             int gpus) const {
  const auto it = collectives.find({op, scope});
  if (it == collectives.end() || it->second.empty()) return nullptr;
  const CollectiveCalibration* best = nullptr;
  int best_d = 0;
  for (const auto& [n, cal] : it->second) {
    const int d = std::abs(n - gpus);
    if (!best || d < best_d) {
      best = &cal;
      best_d = d;
    }
  }
  return best;
}

namespace {

const char* scope_name(CollectiveScope s) { return s == CollectiveScope::kIntraNode ? "intra" : "inter"; }

YAML::Node flow_seq(const std::vector<double>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (double d : v) n.push_back(d);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

EfficiencyCurve read_curve(const YAML::Node& x, const YAML::Node& y, const std::string& what) {
  EfficiencyCurve c;
  if (!x.IsSequence() || !y.IsSequence() || x.size() != y.size() || x.size() == 0)
    throw std::runtime_error(what + ": needs equally long, non-empty point lists");
  for (std::size_t i = 0; i < x.size(); ++i) {
    c.x.push_back(x[i].as<double>());
    c.y.push_back(y[i].as<double>());
    if (c.x.back() <= 0.0 || c.y.back() <= 0.0) throw std::runtime_error(what + ": points must be positive");
    if (i > 0 && c.x[i] <= c.x[i - 1]) throw std::runtime_error(what + ": points must increase");
  }
  return c;
}

}  // namespace

YAML::Node HardwareCalibration::to_yaml() const {
  YAML::Node out(YAML::NodeType::Map);
  out["format"] = "moesim-profile/1";
  out["base"] = base;
  out["device"] = device;
  out["holdout"] = holdout;
  if (gemm_peak || memory_efficiency) {
    YAML::Node c(YAML::NodeType::Map);
    if (gemm_peak) c["gemm_peak"] = *gemm_peak;
    if (memory_efficiency) c["memory"] = *memory_efficiency;
    out["compute"] = c;
  }
  if (host_speed) out["host"]["speed"] = *host_speed;
  YAML::Node g(YAML::NodeType::Sequence);
  for (const auto& [key, curve] : gemm) {
    YAML::Node e(YAML::NodeType::Map);
    e["dtype"] = dtype_name(std::get<0>(key));
    e["n"] = std::get<1>(key);
    e["k"] = std::get<2>(key);
    e["m"] = flow_seq(curve.x);
    e["efficiency"] = flow_seq(curve.y);
    g.push_back(e);
  }
  out["gemm"] = g;
  YAML::Node col(YAML::NodeType::Sequence);
  for (const auto& [key, by_gpus] : collectives) {
    for (const auto& [gpus, cal] : by_gpus) {
      YAML::Node e(YAML::NodeType::Map);
      e["op"] = key.first;
      e["scope"] = scope_name(key.second);
      e["gpus"] = gpus;
      e["launch_us"] = cal.launch_us;
      if (cal.hops_in_launch) e["hops_in_launch"] = true;
      e["bytes"] = flow_seq(cal.efficiency.x);
      e["efficiency"] = flow_seq(cal.efficiency.y);
      col.push_back(e);
    }
  }
  out["collectives"] = col;
  YAML::Node links_node(YAML::NodeType::Map);
  for (const auto& [kind, fit] : links) {
    YAML::Node e(YAML::NodeType::Map);
    e["latency_us"] = fit.latency_us;
    e["bandwidth_GBps"] = fit.bandwidth_GBps;
    links_node[kind] = e;
  }
  out["links"] = links_node;
  if (!gemm_fits.empty()) {
    YAML::Node fits(YAML::NodeType::Sequence);
    for (const GemmKernelFit& f : gemm_fits) fits.push_back(f.to_yaml());
    out["gemm_fits"] = fits;
  }
  if (!attention_fits.empty()) {
    YAML::Node fits(YAML::NodeType::Sequence);
    for (const AttentionKernelFit& f : attention_fits) fits.push_back(f.to_yaml());
    out["attention_fits"] = fits;
  }
  if (!deepep_fits.empty()) {
    YAML::Node fits(YAML::NodeType::Sequence);
    for (const DeepEpKernelFit& f : deepep_fits) fits.push_back(f.to_yaml());
    out["deepep_fits"] = fits;
  }
  return out;
}

HardwareCalibration HardwareCalibration::from_yaml(const YAML::Node& node) {
  if (!node.IsMap() || !node["format"] || node["format"].as<std::string>() != "moesim-profile/1")
    throw std::runtime_error("not a moesim profile (expected 'format: moesim-profile/1')");
  HardwareCalibration h;
  h.base = node["base"] ? node["base"].as<std::string>() : "";
  h.device = node["device"] ? node["device"].as<std::string>() : "";
  h.holdout = node["holdout"] ? node["holdout"].as<double>() : 0.0;
  if (const auto c = node["compute"]) {
    if (c["gemm_peak"]) h.gemm_peak = c["gemm_peak"].as<double>();
    if (c["memory"]) h.memory_efficiency = c["memory"].as<double>();
  }
  if (const auto host = node["host"])
    if (host["speed"]) h.host_speed = host["speed"].as<double>();
  if (const auto g = node["gemm"]) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      const std::string what = "gemm[" + std::to_string(i) + "]";
      DType dt;
      if (!parse_dtype(g[i]["dtype"].as<std::string>(), dt)) throw std::runtime_error(what + ": unknown dtype");
      h.gemm[{dt, g[i]["n"].as<std::int64_t>(), g[i]["k"].as<std::int64_t>()}] =
          read_curve(g[i]["m"], g[i]["efficiency"], what);
    }
  }
  if (const auto col = node["collectives"]) {
    for (std::size_t i = 0; i < col.size(); ++i) {
      const std::string what = "collectives[" + std::to_string(i) + "]";
      const std::string scope = col[i]["scope"].as<std::string>();
      if (scope != "intra" && scope != "inter") throw std::runtime_error(what + ": scope must be intra or inter");
      CollectiveCalibration cal;
      cal.launch_us = col[i]["launch_us"].as<double>();
      cal.hops_in_launch = col[i]["hops_in_launch"] && col[i]["hops_in_launch"].as<bool>();
      cal.efficiency = read_curve(col[i]["bytes"], col[i]["efficiency"], what);
      h.collectives[{col[i]["op"].as<std::string>(),
                     scope == "intra" ? CollectiveScope::kIntraNode : CollectiveScope::kInterNode}]
                   [col[i]["gpus"].as<int>()] = cal;
    }
  }
  if (const auto l = node["links"]) {
    for (const auto& kv : l)
      h.links[kv.first.as<std::string>()] = LinkFit{kv.second["latency_us"].as<double>(),
                                                    kv.second["bandwidth_GBps"].as<double>()};
  }
  if (const auto fits = node["gemm_fits"]) {
    if (!fits.IsSequence()) throw std::runtime_error("gemm_fits: expected a list");
    for (std::size_t i = 0; i < fits.size(); ++i) {
      try {
        h.gemm_fits.push_back(GemmKernelFit::from_yaml(fits[i]));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("gemm_fits[" + std::to_string(i) + "]: " + e.what());
      }
    }
  }
  if (const auto fits = node["attention_fits"]) {
    if (!fits.IsSequence()) throw std::runtime_error("attention_fits: expected a list");
    for (std::size_t i = 0; i < fits.size(); ++i) {
      try {
        h.attention_fits.push_back(AttentionKernelFit::from_yaml(fits[i]));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("attention_fits[" + std::to_string(i) + "]: " + e.what());
      }
    }
  }
  if (const auto fits = node["deepep_fits"]) {
    if (!fits.IsSequence()) throw std::runtime_error("deepep_fits: expected a list");
    for (std::size_t i = 0; i < fits.size(); ++i) {
      try {
        h.deepep_fits.push_back(DeepEpKernelFit::from_yaml(fits[i]));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("deepep_fits[" + std::to_string(i) + "]: " + e.what());
      }
    }
  }
  return h;
}

namespace {

// What is physically impossible in a profile ("" if nothing): an efficiency that is not a
// positive finite number or is past 2 (twice the datasheet's peak or line rate), a negative or
// non-finite launch or latency, a link of non-positive or non-finite bandwidth.
std::string implausible(const HardwareCalibration& h) {
  const auto efficiency_ok = [](double e) { return std::isfinite(e) && e > 0.0 && e <= 2.0; };
  const auto curve_ok = [&](const EfficiencyCurve& c) {
    for (double x : c.x)
      if (!std::isfinite(x)) return false;
    return std::all_of(c.y.begin(), c.y.end(), efficiency_ok);
  };
  if (h.gemm_peak && !efficiency_ok(*h.gemm_peak)) return "gemm_peak must be in (0, 2]";
  if (h.memory_efficiency && !efficiency_ok(*h.memory_efficiency)) return "memory_efficiency must be in (0, 2]";
  if (h.host_speed && !(std::isfinite(*h.host_speed) && *h.host_speed >= 1e-3 && *h.host_speed <= 1e3))
    return "host speed must be in [0.001, 1000]";
  for (const auto& [key, curve] : h.gemm)
    if (!curve_ok(curve)) return "a GEMM efficiency curve holds a value outside (0, 2] or not finite";
  for (const auto& [key, by_gpus] : h.collectives)
    for (const auto& [gpus, cal] : by_gpus) {
      if (!std::isfinite(cal.launch_us) || cal.launch_us < 0.0) return key.first + ": launch_us must be >= 0 and finite";
      if (!curve_ok(cal.efficiency)) return key.first + ": an efficiency outside (0, 2] or not finite";
    }
  for (std::size_t i = 0; i < h.gemm_fits.size(); ++i)
    if (const std::string why = h.gemm_fits[i].implausible(); !why.empty())
      return "gemm_fits[" + std::to_string(i) + "]: " + why;
  for (std::size_t i = 0; i < h.attention_fits.size(); ++i)
    if (const std::string why = h.attention_fits[i].implausible(); !why.empty())
      return "attention_fits[" + std::to_string(i) + "]: " + why;
  for (std::size_t i = 0; i < h.deepep_fits.size(); ++i)
    if (const std::string why = h.deepep_fits[i].implausible(); !why.empty())
      return "deepep_fits[" + std::to_string(i) + "]: " + why;
  for (const auto& [name, link] : h.links) {
    if (!std::isfinite(link.latency_us) || link.latency_us < 0.0) return "link " + name + ": latency_us must be >= 0";
    if (!std::isfinite(link.bandwidth_GBps) || link.bandwidth_GBps <= 0.0)
      return "link " + name + ": bandwidth_GBps must be a positive finite number";
  }
  return "";
}

}  // namespace

HardwareCalibration load_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(SourceLocation{path, 0, 0}, "cannot read calibration profile");
  std::stringstream buf;
  buf << in.rdbuf();
  HardwareCalibration h;
  try {
    h = HardwareCalibration::from_yaml(load_yaml_input(buf.str(), path, "invalid profile"));
  } catch (const InputError&) {
    throw;
  } catch (const YAML::Exception& e) {
    throw InputError(SourceLocation{path, e.mark.line + 1, e.mark.column + 1}, "invalid profile: " + e.msg);
  } catch (const std::runtime_error& e) {
    throw InputError(SourceLocation{path, 0, 0}, std::string("invalid profile: ") + e.what());
  }
  if (const std::string why = implausible(h); !why.empty())
    throw InputError(SourceLocation{path, 0, 0}, "invalid profile: " + why);
  return h;
}

}  // namespace moesim

// Defined here rather than in cluster.cpp: it is the one place that knows what a profile changes.
#include "hardware/cluster.hpp"

namespace moesim {

void apply_calibration(ClusterSpec& spec, HardwareCalibration profile) {
  if (const auto it = profile.links.find("h2d_pinned"); it != profile.links.end() && it->second.bandwidth_GBps > 0.0)
    spec.pcie_bandwidth_GBps = it->second.bandwidth_GBps;
  spec.calibration = std::make_shared<const HardwareCalibration>(std::move(profile));
}

}  // namespace moesim
