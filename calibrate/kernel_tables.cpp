// Kernel tables → GemmKernelFits. The fit is Levenberg-Marquardt on log time over five physical
// parameters (gemm_kernel_fit.hpp), then the median log residual per measured shape: the part
// of the time that comes from the kernel library's choices rather than from the hardware.
#include "calibrate/kernel_tables.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include <Eigen/Dense>

#include "calibrate/levenberg_marquardt.hpp"

#include "calibrate/csv_table.hpp"
#include "core/diagnostics.hpp"
#include "hardware/cost_model.hpp"

namespace moesim::calibration {
namespace {

std::string_view first_line(std::string_view text) { return text.substr(0, text.find('\n')); }

// Column of each cell (1-based) in `line`.
int column_of(std::string_view line, std::size_t cell) {
  std::size_t pos = 0;
  for (std::size_t i = 0; i < cell && pos != std::string_view::npos; ++i) {
    pos = line.find(',', pos);
    if (pos != std::string_view::npos) ++pos;
  }
  return pos == std::string_view::npos ? 1 : static_cast<int>(pos) + 1;
}

bool has_all(const std::vector<std::string_view>& header, std::initializer_list<std::string_view> names) {
  return std::all_of(names.begin(), names.end(),
                     [&](std::string_view n) { return std::find(header.begin(), header.end(), n) != header.end(); });
}

}  // namespace

std::optional<std::string> kernel_table_kind(const std::string& text) {
  const auto h = split_csv_line(first_line(text));
  const auto op_is = [&](std::string_view name) {
    // The op_name of the first data row tells attention tables apart (same columns).
    const std::string_view rest = std::string_view(text).substr(std::min(text.size(), first_line(text).size() + 1));
    const auto row = split_csv_line(first_line(rest));
    for (std::size_t i = 0; i < h.size() && i < row.size(); ++i)
      if (h[i] == "op_name") return row[i] == name;
    return false;
  };
  if (has_all(h, {"system", "gemm_dtype", "m", "n", "k", "latency_ms"})) return "gemm";
  if (has_all(h, {"system", "moe_dtype", "num_tokens", "inter_size", "topk", "distribution"})) return "moe";
  if (has_all(h, {"system", "attn_dtype", "kv_cache_dtype", "num_key_value_heads", "step", "latency"}))
    return op_is("context_attention") ? "context_attention" : "generation_attention";
  if (has_all(h, {"system", "mla_dtype", "kv_cache_dtype", "num_heads", "step", "latency"}))
    return op_is("mla_context") ? "context_mla" : "generation_mla";
  if (has_all(h, {"system", "nccl_version", "op_name", "message_elems", "latency_ms"})) return "nccl";
  if (has_all(h, {"system", "implementation", "allreduce_dtype", "message_elems", "latency_ms"})) return "custom_allreduce";
  if (has_all(h, {"system", "num_token", "num_topk", "dispatch_avg_t_us", "combine_avg_t_us"})) return "deepep_ll";
  if (has_all(h, {"system", "num_token", "num_topk", "dispatch_transmit_us", "combine_transmit_us"})) return "deepep_normal";
  return std::nullopt;
}

std::vector<GemmTableRow> read_gemm_table(const std::string& text, const std::string& path) {
  const std::string_view all(text);
  const std::string_view header_line = first_line(all);
  const auto header = split_csv_line(header_line);
  const std::vector<std::string_view> need = {"system", "backend", "kernel_source", "gemm_dtype", "m", "n", "k", "latency_ms"};
  std::vector<std::size_t> at;
  for (auto name : need) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw InputError(SourceLocation{path, 1, 1}, "gemm table: no column '" + std::string(name) + "' in the header");
    at.push_back(static_cast<std::size_t>(it - header.begin()));
  }
  std::vector<GemmTableRow> rows;
  std::map<std::tuple<std::string, std::string, std::string, int, std::int64_t, std::int64_t, std::int64_t>, std::pair<double, int>> seen;
  std::vector<Diagnostic> bad;
  std::string_view rest = all.substr(std::min(all.size(), header_line.size() + 1));
  for (int number = 2; !rest.empty() && bad.size() < 20; ++number) {
    const std::string_view line = first_line(rest);
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
    const auto c = split_csv_line(line);
    const auto where = [&](std::size_t col) { return SourceLocation{path, number, column_of(line, at[col])}; };
    if (c.size() != header.size()) {
      bad.push_back({SourceLocation{path, number, 1},
                     "expected " + std::to_string(header.size()) + " cells, found " + std::to_string(c.size())});
      continue;
    }
    GemmTableRow r;
    r.line = number;
    r.system = c[at[0]];
    r.engine = c[at[1]];
    r.kernel_source = c[at[2]];
    if (!parse_gemm_family(std::string(c[at[3]]), r.family)) {
      bad.push_back({where(3), "gemm_dtype '" + std::string(c[at[3]]) + "' is not one of bfloat16, fp8, fp8_block, nvfp4"});
      continue;
    }
    bool ok = true;
    std::int64_t* dims[] = {&r.m, &r.n, &r.k};
    for (std::size_t d = 0; d < 3; ++d) {
      const std::string_view v = c[at[4 + d]];
      const auto res = std::from_chars(v.data(), v.data() + v.size(), *dims[d]);
      if (res.ec != std::errc() || res.ptr != v.data() + v.size() || *dims[d] < 1 || *dims[d] > (std::int64_t{1} << 31)) {
        bad.push_back({where(4 + d), std::string(need[4 + d]) + " must be a whole number in [1, 2^31], got '" + std::string(v) + "'"});
        ok = false;
      }
    }
    const std::string lat(c[at[7]]);
    char* end = nullptr;
    const double ms = std::strtod(lat.c_str(), &end);
    if (lat.empty() || end != lat.c_str() + lat.size() || !std::isfinite(ms) || ms <= 0.0 || ms > 1e9) {
      bad.push_back({where(7), "latency_ms must be a positive number of milliseconds (at most 1e9), got '" + lat + "'"});
      ok = false;
    }
    if (!ok) continue;
    r.time_us = ms * 1e3;
    const auto key = std::make_tuple(r.system, r.engine, r.kernel_source, static_cast<int>(r.family), r.m, r.n, r.k);
    if (const auto it = seen.find(key); it != seen.end()) {
      if (it->second.first != r.time_us)
        bad.push_back({where(7), "this shape was measured on line " + std::to_string(it->second.second) +
                                     " with another time: which one is the kernel's?"});
      continue;
    }
    seen.emplace(key, std::make_pair(r.time_us, number));
    rows.push_back(std::move(r));
  }
  if (!bad.empty()) throw InputError(std::move(bad));
  if (rows.empty()) throw InputError(SourceLocation{path, 1, 1}, "gemm table: no rows");
  return rows;
}

std::string kernel_table_system(const GpuSpec& gpu) {
  // The tables' GPUs; siblings of the same architecture are priced by their fits (docs:
  // calibration.md, transfer rule).
  if (gpu.compute_capability == 90) return "h100_sxm";
  if (gpu.compute_capability == 100 || gpu.compute_capability == 103) return "b200_sxm";
  return "";
}

std::vector<char> held_out_rows(const std::vector<GemmTableRow>& rows) {
  std::map<std::pair<std::string, int>, std::pair<std::set<std::int64_t>, std::set<std::int64_t>>> values;
  for (const auto& r : rows) {
    auto& v = values[{r.engine, static_cast<int>(r.family)}];
    v.first.insert(r.n);
    v.second.insert(r.k);
  }
  const auto chosen = [](const std::set<std::int64_t>& s) {
    std::set<std::int64_t> out;
    std::size_t i = 0;
    for (auto it = s.begin(); it != s.end(); ++it, ++i)
      if (i % 4 == 2 && i + 1 < s.size()) out.insert(*it);
    return out;
  };
  std::map<std::pair<std::string, int>, std::pair<std::set<std::int64_t>, std::set<std::int64_t>>> held;
  for (const auto& [key, v] : values) held[key] = {chosen(v.first), chosen(v.second)};
  std::vector<char> mask(rows.size(), 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& h = held[{rows[i].engine, static_cast<int>(rows[i].family)}];
    mask[i] = h.first.count(rows[i].n) || h.second.count(rows[i].k);
  }
  return mask;
}

namespace {

constexpr int kParams = 5;

// Unconstrained coordinates → the fit's parameters, each kept in its physical range.
void apply(const Eigen::VectorXd& x, GemmKernelFit& f) {
  f.compute_efficiency = std::clamp(std::exp(x[0]), 0.02, 1.5);
  f.memory_efficiency = std::clamp(std::exp(x[1]), 0.02, 1.5);
  f.sm_bandwidth_GBps = std::clamp(std::exp(x[2]), 1.0, 1e4);
  f.overhead_us = std::clamp(std::exp(x[3]), 0.0, 1e3);
  f.blend = std::clamp(1.0 + std::exp(x[4]), 1.0, 32.0);
}

struct Sample {
  GemmTerms terms;
  double log_time = 0.0;  ///< log seconds
};

// The median log(measured / physics) at each measured (m, n, k) of the fit's rows. A grid point
// without a row takes the median residual of its m (the rows of a table are a full grid, so
// this only fills holes of hand-cut tables).
ResidualGrid residual_grid(const std::vector<const GemmTableRow*>& rows, const std::vector<double>& log_residual) {
  std::set<std::int64_t> ms, ns, ks;
  for (const auto* r : rows) ms.insert(r->m), ns.insert(r->n), ks.insert(r->k);
  ResidualGrid g;
  for (auto v : ms) g.log_m.push_back(std::log(static_cast<double>(v)));
  for (auto v : ns) g.log_n.push_back(std::log(static_cast<double>(v)));
  for (auto v : ks) g.log_k.push_back(std::log(static_cast<double>(v)));
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<double>> at;
  std::map<std::int64_t, std::vector<double>> by_m;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    at[{rows[i]->m, rows[i]->n, rows[i]->k}].push_back(log_residual[i]);
    by_m[rows[i]->m].push_back(log_residual[i]);
  }
  for (auto m : ms) {
    const double fill = median(by_m[m]);
    for (auto n : ns)
      for (auto k : ks) {
        const auto it = at.find({m, n, k});
        g.value.push_back(std::clamp(it == at.end() ? fill : median(it->second), -5.0, 5.0));
      }
  }
  return g;
}

}  // namespace

std::vector<GemmKernelFit> fit_gemm_tables(const std::vector<GemmTableRow>& rows, const std::string& system,
                                           const GpuSpec& gpu, bool holdout, std::vector<GemmFitScore>* scores) {
  const std::vector<char> held = holdout ? held_out_rows(rows) : std::vector<char>(rows.size(), 0);
  std::map<std::pair<std::string, int>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].system == system) groups[{rows[i].engine, static_cast<int>(rows[i].family)}].push_back(i);
  const ComputeCostModel datasheet(gpu);
  std::vector<GemmKernelFit> fits;
  for (const auto& [key, idx] : groups) {
    GemmKernelFit fit;
    fit.engine = key.first;
    fit.family = static_cast<GemmFamily>(key.second);
    fit.system = system;
    std::set<std::string> sources;
    for (auto i : idx) sources.insert(rows[i].kernel_source);
    for (const auto& s : sources) fit.kernel_source += (fit.kernel_source.empty() ? "" : "+") + s;
    // TensorRT-LLM's per-tensor FP8 GEMM is timed with the activation's dynamic quantisation
    // (../shared/data/kernels/MANIFEST.md); the other engines' FP8 kernels take scaled inputs.
    fit.quantises_activation = fit.engine == "trtllm" && fit.family == GemmFamily::kFp8;
    const DType dt = gemm_family_dtype(fit.family);
    const double peak = gpu.peak(dt) > 0 ? gpu.peak(dt) : gpu.peak(DType::kFp16);
    const double bw = gpu.hbm_bandwidth_Bps;
    std::vector<Sample> train;
    std::vector<const GemmTableRow*> train_rows;
    std::vector<std::pair<const GemmTableRow*, GemmTerms>> all;
    for (auto i : idx) {
      const Op op = make_gemm("gemm", rows[i].m, rows[i].n, rows[i].k, dt);
      const GemmTerms t = datasheet.gemm_terms(op);
      all.emplace_back(&rows[i], t);
      if (!held[i]) {
        train.push_back({t, std::log(rows[i].time_us * 1e-6)});
        train_rows.push_back(&rows[i]);
      }
    }
    if (train.size() < 2 * kParams) continue;  // too few rows to fit five parameters
    const auto residuals = [&](const Eigen::VectorXd& x) {
      GemmKernelFit f = fit;
      apply(x, f);
      Eigen::VectorXd r(static_cast<Eigen::Index>(train.size()));
      for (std::size_t i = 0; i < train.size(); ++i)
        r[static_cast<Eigen::Index>(i)] = std::log(f.seconds(train[i].terms, peak, bw, true)) - train[i].log_time;
      return r;
    };
    // Two starts (compute- and memory-dominated guesses); the better end wins.
    double best = INFINITY;
    Eigen::VectorXd best_x;
    for (const auto& start : {std::vector<double>{0.7, 0.8, 50.0, 5.0, 2.0}, std::vector<double>{0.5, 0.6, 500.0, 10.0, 0.5}}) {
      Eigen::VectorXd x(kParams);
      for (int p = 0; p < kParams; ++p) x[p] = std::log(start[static_cast<std::size_t>(p)]);
      const double sse = levenberg_marquardt(x, residuals);
      if (sse < best) best = sse, best_x = x;
    }
    apply(best_x, fit);
    std::vector<double> log_res;
    for (const auto& s : train) log_res.push_back(s.log_time - std::log(fit.seconds(s.terms, peak, bw, true)));
    fit.residual = residual_grid(train_rows, log_res);
    HeldOutErrors errors;
    for (const auto& [row, t] : all) {
      const double measured = row->time_us * 1e-6;
      if (!held[static_cast<std::size_t>(row - rows.data())]) {
        errors.add_train(fit.seconds(t, peak, bw), measured);
        continue;
      }
      errors.add_held(fit.seconds(t, peak, bw), fit.seconds(t, peak, bw, true),
                      datasheet.kernel_seconds(make_gemm("gemm", row->m, row->n, row->k, dt)), measured);
    }
    fit.fitted_rows = static_cast<int>(train.size());
    fit.fitted_median_error = errors.train_median();
    const bool host_bound = fit.overhead_us > kMaxGemmKernelOverheadUs;
    if (scores) {
      GemmFitScore s;
      static_cast<HeldOutScore&>(s) = errors.score();
      s.engine = fit.engine;
      s.kernel_source = fit.kernel_source;
      s.family = fit.family;
      if (host_bound)
        s.refused = "host time, not a kernel's: a fixed cost of " + std::to_string(static_cast<int>(fit.overhead_us)) +
                    " us at every shape; priced by another engine's " + gemm_family_name(fit.family) + " kernel";
      scores->push_back(s);
    }
    if (!host_bound) fits.push_back(std::move(fit));
  }
  return fits;
}

nlohmann::json score_json(const GemmFitScore& s) {
  nlohmann::json j = held_out_json(s, "datasheet");
  j.update({{"engine", s.engine}, {"family", gemm_family_name(s.family)}, {"kernel_source", s.kernel_source}});
  if (!s.refused.empty()) j["refused"] = s.refused;
  return j;
}

}  // namespace moesim::calibration
