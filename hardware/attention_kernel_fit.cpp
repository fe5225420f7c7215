#include "hardware/attention_kernel_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim {

const char* attention_family_name(AttentionFamily f) {
  switch (f) {
    case AttentionFamily::kMhaDecode: return "mha-decode";
    case AttentionFamily::kMhaPrefill: return "mha-prefill";
    case AttentionFamily::kMlaDecode: return "mla-decode";
    case AttentionFamily::kMlaPrefill: return "mla-prefill";
  }
  return "?";
}

bool parse_attention_family(const std::string& s, AttentionFamily& out) {
  for (int i = 0; i < kNumAttentionFamilies; ++i)
    if (s == attention_family_name(static_cast<AttentionFamily>(i))) {
      out = static_cast<AttentionFamily>(i);
      return true;
    }
  return false;
}

AttentionFamily attention_family_of(const Op& op) {
  switch (op.attention) {
    case AttentionForm::kMlaLatent: return AttentionFamily::kMlaDecode;
    case AttentionForm::kMlaFull: return AttentionFamily::kMlaPrefill;
    case AttentionForm::kGqa:
    case AttentionForm::kLinear:   // no table: ComputeCostModel::attention_fit gives none
    case AttentionForm::kIndexer: break;
  }
  // Decode reads a cache longer than its few query tokens; a prompt (or its first chunk) attends
  // only to itself, so its keys never outnumber its query tokens.
  return op.m <= kDecodeMaxQueryTokens && op.n > op.m ? AttentionFamily::kMhaDecode : AttentionFamily::kMhaPrefill;
}

AttentionTerms AttentionTerms::of(const Op& op) {
  AttentionTerms t;
  t.flops = op.flops;
  t.bytes = op.bytes;
  const std::int64_t heads = std::max<std::int64_t>(1, op.heads);
  t.heads = static_cast<double>(heads);
  t.sequences = static_cast<double>(std::max<std::int64_t>(1, op.batch / heads));
  t.group = op.attention == AttentionForm::kGqa
                ? static_cast<double>(std::max<std::int64_t>(1, heads / std::max<std::int64_t>(1, op.kv_heads)))
                : t.heads;
  // Decode reads `n` keys for 1 query token; prefill's m query tokens see up to m keys (fewer
  // under a window): the longer of the two is the sequence's length either way.
  t.length = static_cast<double>(std::max<std::int64_t>({1, op.m, op.n}));
  return t;
}

double AttentionKernelFit::seconds(const AttentionTerms& t, double peak_flops, double hbm_Bps, int sms,
                                   bool physics_only) const {
  const double compute = t.flops / (peak_flops * compute_efficiency);
  const double memory = t.bytes / (hbm_Bps * memory_efficiency);
  const double big = std::max(compute, memory);
  double s = 0.0;
  if (big > 0.0) s = big * std::pow(std::pow(compute / big, blend) + std::pow(memory / big, blend), 1.0 / blend);
  s += overhead_us * 1e-6 + unit_us * 1e-6 * t.sequences * t.heads / std::max(1, sms);
  if (!physics_only) s *= std::exp(residual.at(std::log(t.sequences), std::log(t.length), std::log(t.group)));
  return s;
}

namespace {

constexpr const char* kAttentionAxes[3] = {"log_sequences", "log_length", "log_group"};

DType dtype_named(const std::string& s, const char* field) {
  DType d;
  if (!parse_dtype(s, d)) throw std::runtime_error(std::string(field) + ": unknown dtype '" + s + "'");
  return d;
}

}  // namespace

YAML::Node AttentionKernelFit::to_yaml() const {
  YAML::Node e(YAML::NodeType::Map);
  e["engine"] = engine;
  e["family"] = attention_family_name(family);
  e["compute_dtype"] = dtype_name(compute_dtype);
  e["kv_dtype"] = dtype_name(kv_dtype);
  e["system"] = system;
  e["compute_efficiency"] = compute_efficiency;
  e["memory_efficiency"] = memory_efficiency;
  e["overhead_us"] = overhead_us;
  e["unit_us"] = unit_us;
  e["blend"] = blend;
  e["fitted_rows"] = fitted_rows;
  e["fitted_median_error"] = fitted_median_error;
  if (!residual.empty()) e["residual"] = residual.to_yaml(kAttentionAxes);
  return e;
}

AttentionKernelFit AttentionKernelFit::from_yaml(const YAML::Node& node) {
  if (!node.IsMap()) throw std::runtime_error("expected a map");
  AttentionKernelFit f;
  f.engine = node["engine"].as<std::string>();
  if (!parse_attention_family(node["family"].as<std::string>(), f.family))
    throw std::runtime_error("family must be one of mha-decode, mha-prefill, mla-decode, mla-prefill");
  f.compute_dtype = dtype_named(node["compute_dtype"].as<std::string>(), "compute_dtype");
  f.kv_dtype = dtype_named(node["kv_dtype"].as<std::string>(), "kv_dtype");
  f.system = node["system"] ? node["system"].as<std::string>() : "";
  f.compute_efficiency = node["compute_efficiency"].as<double>();
  f.memory_efficiency = node["memory_efficiency"].as<double>();
  f.overhead_us = node["overhead_us"].as<double>();
  f.unit_us = node["unit_us"].as<double>();
  f.blend = node["blend"].as<double>();
  f.fitted_rows = node["fitted_rows"] ? node["fitted_rows"].as<int>() : 0;
  f.fitted_median_error = node["fitted_median_error"] ? node["fitted_median_error"].as<double>() : 0.0;
  if (const auto r = node["residual"]) f.residual = ResidualGrid::from_yaml(r, kAttentionAxes);
  return f;
}

std::string AttentionKernelFit::implausible() const {
  const auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in(compute_efficiency, 1e-3, 1.5)) return "compute_efficiency must be in [0.001, 1.5]";
  if (!in(memory_efficiency, 1e-3, 1.5)) return "memory_efficiency must be in [0.001, 1.5]";
  if (!in(overhead_us, 0.0, 1e4)) return "overhead_us must be in [0, 10000]";
  if (!in(unit_us, 0.0, 1e4)) return "unit_us must be in [0, 10000]";
  if (!in(blend, 1.0, 64.0)) return "blend must be in [1, 64]";
  return residual.implausible();
}

}  // namespace moesim
