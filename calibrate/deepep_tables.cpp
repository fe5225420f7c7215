// DeepEP tables → DeepEpKernelFits: Levenberg-Marquardt on log time over the fixed cost and the
// three rate efficiencies, then the median log residual per measured (tokens, hidden·top-k, EP).
#include "calibrate/deepep_tables.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "calibrate/csv_table.hpp"
#include "calibrate/levenberg_marquardt.hpp"
#include "hardware/deepep.hpp"

namespace moesim::calibration {
namespace {

// One (row, op) priced by the closed form: what the fit's formula reads.
struct Sample {
  DeepEpCost cost;  ///< bytes and nominal rates (uncalibrated)
  double measured_us = 0.0;
  double tokens = 0.0, hidden_topk = 0.0, ranks = 0.0;
  std::size_t row = 0;
};

double fitted_us(const DeepEpKernelFit& f, const DeepEpCost& c) {
  double drain = 0.0;
  if (c.nvlink_bytes > 0 && c.nvlink_GBps > 0) drain = std::max(drain, c.nvlink_bytes / (f.nvlink_efficiency * c.nvlink_GBps * 1e3));
  if (c.rdma_bytes > 0 && c.rdma_GBps > 0) drain = std::max(drain, c.rdma_bytes / (f.rdma_efficiency * c.rdma_GBps * 1e3));
  if (c.counted_bytes > 0 && c.sm_GBps > 0) drain = std::max(drain, c.counted_bytes / (f.sm_efficiency * c.sm_GBps * 1e3));
  return f.overhead_us + drain;
}

void apply(const Eigen::VectorXd& x, DeepEpKernelFit& f) {
  f.overhead_us = std::clamp(std::exp(x[0]), 0.0, 1e3);
  f.nvlink_efficiency = std::clamp(std::exp(x[1]), 0.01, 20.0);
  f.rdma_efficiency = std::clamp(std::exp(x[2]), 0.01, 20.0);
  f.sm_efficiency = std::clamp(std::exp(x[3]), 0.01, 20.0);
}

ResidualGrid residual_grid(const std::vector<Sample>& s, const std::vector<double>& log_residual) {
  std::set<double> a, b, c;
  for (const auto& x : s) a.insert(x.tokens), b.insert(x.hidden_topk), c.insert(x.ranks);
  ResidualGrid g;
  for (double v : a) g.log_m.push_back(std::log(v));
  for (double v : b) g.log_n.push_back(std::log(v));
  for (double v : c) g.log_k.push_back(std::log(v));
  std::map<std::tuple<double, double, double>, std::vector<double>> at;
  std::map<double, std::vector<double>> by_tokens;
  for (std::size_t i = 0; i < s.size(); ++i) {
    at[{s[i].tokens, s[i].hidden_topk, s[i].ranks}].push_back(log_residual[i]);
    by_tokens[s[i].tokens].push_back(log_residual[i]);
  }
  for (double x : a)
    for (double y : b)
      for (double z : c) {
        const auto it = at.find({x, y, z});
        g.value.push_back(std::clamp(it == at.end() ? median(by_tokens[x]) : median(it->second), -5.0, 5.0));
      }
  return g;
}

}  // namespace

std::vector<DeepEpTableRow> read_deepep_table(const std::string& text, const std::string& path, const std::string& kind) {
  const bool ll = kind == "deepep_ll";
  if (!ll && kind != "deepep_normal") throw InputError(SourceLocation{path, 1, 1}, "not a DeepEP table: " + kind);
  // 0 system, 1 nodes, 2 hidden, 3 tokens, 4 top-k, 5 experts, then LL: 6 dispatch, 7 combine;
  // normal: 6 dispatch SMs, 7 dispatch transmit, 8 dispatch notify, 9 combine transmit, 10 combine notify.
  std::vector<std::string> need = {"system", "node_num", "hidden_size", "num_token", "num_topk", "num_experts"};
  if (ll) need.insert(need.end(), {"dispatch_avg_t_us", "combine_avg_t_us"});
  else need.insert(need.end(), {"dispatch_sms", "dispatch_transmit_us", "dispatch_notify_us", "combine_transmit_us",
                                "combine_notify_us"});
  need.push_back("version");
  const std::size_t version_column = need.size() - 1;
  CsvTable table(text, path, kind + " table", need);
  std::vector<DeepEpTableRow> rows;
  std::map<std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                      std::int64_t>,
           std::pair<double, int>>
      seen;
  std::vector<std::string> versions;
  while (table.next()) {
    DeepEpTableRow r;
    r.line = table.line();
    r.system = table.cell(0);
    r.kernel = ll ? "deepep-ll" : "deepep-normal";
    std::int64_t v[6] = {0, 0, 0, 0, 0, 0};
    bool ok = table.whole(1, 1, 1024, v[0]) & table.whole(2, 1, 1 << 20, v[1]) & table.whole(3, 0, 1 << 24, v[2]) &
              table.whole(4, 1, 1024, v[3]) & table.whole(5, 1, 1 << 20, v[4]);
    double d = 0.0, c = 0.0, dn = 0.0, cn = 0.0;
    if (ll) {
      ok &= table.number(6, 0.0, 1e9, d);
      ok &= table.number(7, 0.0, 1e9, c);
    } else {
      ok &= table.whole(6, 1, 1024, v[5]);
      ok &= table.number(7, 0.0, 1e9, d);
      ok &= table.number(9, 0.0, 1e9, c);
      // Notify is 0 where the layout was cached: a time, possibly zero.
      ok &= table.number(8, -1e-9, 1e9, dn);
      ok &= table.number(10, -1e-9, 1e9, cn);
    }
    if (!ok) continue;
    r.nodes = static_cast<int>(v[0]);
    r.hidden = static_cast<int>(v[1]);
    r.tokens = v[2];
    r.top_k = static_cast<int>(v[3]);
    r.experts = static_cast<int>(v[4]);
    r.sms = static_cast<int>(v[5]);
    r.dispatch_us = d + dn;
    r.combine_us = c + cn;
    const std::string version(table.cell(version_column));
    const auto key = std::make_tuple(r.system, version, v[0], v[1], v[2], v[3], v[4], v[5]);
    if (const auto it = seen.find(key); it != seen.end()) {
      if (it->second.first != r.dispatch_us)
        table.problem(ll ? 6 : 7, "this call was measured on line " + std::to_string(it->second.second) +
                                      " with another time: which one is DeepEP's?");
      continue;
    }
    seen.emplace(key, std::make_pair(r.dispatch_us, r.line));
    if (r.tokens == 0) continue;  // nothing moves: no time to fit
    rows.push_back(std::move(r));
    versions.push_back(version);
  }
  table.finish(seen.size());
  // Per (system, nodes) the newest SGLang/DeepEP build measured there (the tables hold two; the
  // older alone has the multi-node rows).
  std::map<std::pair<std::string, int>, std::string> newest;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string& n = newest[{rows[i].system, rows[i].nodes}];
    if (n.empty() || version_numbers(versions[i]) > version_numbers(n)) n = versions[i];
  }
  std::vector<DeepEpTableRow> kept;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (versions[i] == newest[{rows[i].system, rows[i].nodes}]) kept.push_back(std::move(rows[i]));
  return kept;
}

std::vector<char> held_out_deepep_rows(const std::vector<DeepEpTableRow>& rows) {
  std::map<std::pair<std::string, bool>, std::set<long long>> values;
  for (const auto& r : rows) values[{r.kernel, r.nodes > 1}].insert(r.tokens);
  std::map<std::pair<std::string, bool>, std::set<long long>> held;
  for (const auto& [k, s] : values) {
    std::size_t i = 0;
    for (auto it = s.begin(); it != s.end(); ++it, ++i)
      if (i % 4 == 2 && i + 1 < s.size()) held[k].insert(*it);
  }
  std::vector<char> mask(rows.size(), 0);
  for (std::size_t i = 0; i < rows.size(); ++i) mask[i] = held[{rows[i].kernel, rows[i].nodes > 1}].count(rows[i].tokens);
  return mask;
}

std::vector<DeepEpKernelFit> fit_deepep_tables(const std::vector<DeepEpTableRow>& rows, const std::string& system,
                                               const ClusterSpec& base, bool holdout,
                                               std::vector<DeepEpFitScore>* scores) {
  const std::vector<char> held = holdout ? held_out_deepep_rows(rows) : std::vector<char>(rows.size(), 0);
  ClusterSpec plain = base;
  plain.calibration = nullptr;  // the closed form's own bytes and nominal rates
  std::map<int, std::unique_ptr<Cluster>> clusters;  // by nodes
  std::map<std::tuple<std::string, std::string, bool>, std::vector<Sample>> groups;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DeepEpTableRow& r = rows[i];
    if (r.system != system) continue;
    auto& c = clusters[r.nodes];
    if (!c) {
      ClusterSpec s = plain;
      s.nodes = r.nodes;
      c = std::make_unique<Cluster>(std::move(s));
    }
    for (const DeepEpOp op : {DeepEpOp::kDispatch, DeepEpOp::kCombine}) {
      DeepEpParams p;
      p.kernel = r.kernel == "deepep-ll" ? DeepEpKernel::kLowLatency : DeepEpKernel::kNormal;
      p.op = op;
      p.tokens = r.tokens;
      p.hidden = r.hidden;
      p.top_k = r.top_k;
      p.experts = r.experts;
      p.ep = r.nodes * c->spec().gpus_per_node;
      p.fp8 = true;  // DeepEP's tests dispatch in FP8 (combine is BF16 whatever this says)
      p.topk_groups = std::min(r.nodes, 4);  // DeepEP's tests: min(nodes, 4)
      if (r.sms > 0) p.sms = r.sms;
      Sample s;
      try {
        s.cost = deepep_cost(*c, p);
      } catch (const std::exception&) {
        continue;  // a shape the closed form cannot run (hidden not a multiple of 128 in FP8, ...)
      }
      s.measured_us = op == DeepEpOp::kDispatch ? r.dispatch_us : r.combine_us;
      s.tokens = static_cast<double>(r.tokens);
      s.hidden_topk = static_cast<double>(r.hidden) * r.top_k;
      s.ranks = p.ep;
      s.row = i;
      groups[{r.kernel, op == DeepEpOp::kDispatch ? "dispatch" : "combine", r.nodes > 1}].push_back(s);
    }
  }
  std::vector<DeepEpKernelFit> fits;
  for (const auto& [key, all] : groups) {
    DeepEpKernelFit fit;
    fit.kernel = std::get<0>(key);
    fit.op = std::get<1>(key);
    fit.internode = std::get<2>(key);
    fit.system = system;
    std::vector<Sample> train;
    for (const auto& s : all)
      if (!held[s.row]) train.push_back(s);
    if (train.size() < 8) continue;
    const auto residuals = [&](const Eigen::VectorXd& x) {
      DeepEpKernelFit f = fit;
      apply(x, f);
      Eigen::VectorXd r(static_cast<Eigen::Index>(train.size()));
      for (std::size_t i = 0; i < train.size(); ++i)
        r[static_cast<Eigen::Index>(i)] = std::log(fitted_us(f, train[i].cost) / train[i].measured_us);
      return r;
    };
    double best = INFINITY;
    Eigen::VectorXd best_x;
    for (const auto& start : {std::vector<double>{10.0, 0.5, 0.5, 0.5}, std::vector<double>{30.0, 1.0, 1.0, 1.0}}) {
      Eigen::VectorXd x(4);
      for (int p = 0; p < 4; ++p) x[p] = std::log(start[static_cast<std::size_t>(p)]);
      const double sse = levenberg_marquardt(x, residuals);
      if (sse < best) best = sse, best_x = x;
    }
    apply(best_x, fit);
    std::vector<double> log_res;
    for (const auto& s : train) log_res.push_back(std::log(s.measured_us / fitted_us(fit, s.cost)));
    fit.residual = residual_grid(train, log_res);
    HeldOutErrors errors;
    for (const auto& s : all) {
      const double physics = fitted_us(fit, s.cost);
      const double fitted = physics * fit.residual_factor(s.tokens, s.hidden_topk, s.ranks);
      if (held[s.row]) errors.add_held(fitted, physics, s.cost.time_us, s.measured_us);
      else errors.add_train(fitted, s.measured_us);
    }
    fit.fitted_rows = static_cast<int>(train.size());
    fit.fitted_median_error = errors.train_median();
    if (scores) {
      DeepEpFitScore sc;
      static_cast<HeldOutScore&>(sc) = errors.score();
      sc.kernel = fit.kernel;
      sc.op = fit.op;
      sc.internode = fit.internode;
      scores->push_back(sc);
    }
    fits.push_back(std::move(fit));
  }
  return fits;
}

nlohmann::json score_json(const DeepEpFitScore& s) {
  nlohmann::json j = held_out_json(s, "model");
  j.update({{"kernel", s.kernel}, {"op", s.op}, {"internode", s.internode}});
  return j;
}

}  // namespace moesim::calibration
