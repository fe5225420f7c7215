#include "calibrate/collective_tables.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "calibrate/csv_table.hpp"
#include "calibrate/profile.hpp"
#include "hardware/collectives.hpp"

namespace moesim::calibration {

Measurements read_nccl_table(const std::string& text, const std::string& path, const std::string& system) {
  CsvTable table(text, path, "nccl table",
                 {"system", "op_name", "nccl_dtype", "num_gpus", "message_bytes", "latency_ms", "nccl_version"});
  struct Row {
    std::string version, op;
    int gpus;
    double bytes, us;
  };
  std::vector<Row> rows;
  std::size_t read = 0;
  while (table.next()) {
    const std::string op(table.cell(1));
    std::string moesim_op;
    if (op == "all_reduce" || op == "all_gather") moesim_op = op;
    else if (op == "alltoall" || op == "all_to_all") moesim_op = "all_to_all";
    else if (op != "reduce_scatter") {
      table.problem(1, "op_name '" + op + "' is not one of all_reduce, all_gather, alltoall, reduce_scatter");
      continue;
    }
    std::int64_t gpus = 0, bytes = 0;
    double ms = 0.0;
    bool ok = table.whole(3, 1, 1 << 20, gpus);
    ok &= table.whole(4, 1, std::int64_t{1} << 45, bytes);
    ok &= table.number(5, 0.0, 1e9, ms);
    if (!ok) continue;
    ++read;
    // Repeated rows are repeated nccl-tests runs (the collectors' dumps hold several runs of one
    // NCCL version, e.g. H100 2.27.3 twice): each is a sample, and the profile fitter takes the
    // median per size.
    if (table.cell(0) != system || moesim_op.empty() || table.cell(2) == "int8") continue;
    rows.push_back({std::string(table.cell(6)), moesim_op, static_cast<int>(gpus), static_cast<double>(bytes), ms * 1e3});
  }
  table.finish(read);
  // The newest NCCL the system was measured with: what a current engine image ships.
  std::string newest;
  for (const Row& r : rows)
    if (newest.empty() || version_numbers(r.version) > version_numbers(newest)) newest = r.version;
  Measurements m;
  m.source = "aiconfigurator-nccl";
  m.device = system + " NCCL " + newest;
  for (const Row& r : rows)
    if (r.version == newest) m.collectives.push_back({r.op, r.gpus, 1, r.bytes, r.us});
  return m;
}

std::map<std::string, Measurements> read_custom_allreduce_table(const std::string& text, const std::string& path,
                                                               const std::string& system) {
  CsvTable table(text, path, "custom all-reduce table",
                 {"system", "backend", "version", "kernel_source", "num_gpus", "message_elems", "latency_ms"});
  struct Row {
    std::string backend, version, source;
    int gpus;
    double bytes, us;
  };
  std::vector<Row> rows;
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::int64_t, std::int64_t>,
           std::pair<double, int>>
      seen;
  while (table.next()) {
    std::int64_t gpus = 0, elems = 0;
    double ms = 0.0;
    bool ok = table.whole(4, 1, 1 << 20, gpus);
    ok &= table.whole(5, 1, std::int64_t{1} << 44, elems);
    ok &= table.number(6, 0.0, 1e9, ms);
    if (!ok) continue;
    const auto key = std::make_tuple(std::string(table.cell(0)), std::string(table.cell(1)), std::string(table.cell(2)),
                                     std::string(table.cell(3)), gpus, elems);
    if (const auto it = seen.find(key); it != seen.end()) {
      if (it->second.first != ms)
        table.problem(6, "this all-reduce was measured on line " + std::to_string(it->second.second) +
                             " with another time: which one is the kernel's?");
      continue;
    }
    seen.emplace(key, std::make_pair(ms, table.line()));
    if (table.cell(0) != system) continue;
    // Elements of bf16: the activations tensor parallelism reduces.
    rows.push_back({std::string(table.cell(1)), std::string(table.cell(2)), std::string(table.cell(3)),
                    static_cast<int>(gpus), 2.0 * static_cast<double>(elems), ms * 1e3});
  }
  table.finish(seen.size());
  // Per engine: its newest version, and within it the CUDA-graph kernel where there is one.
  std::map<std::string, std::string> newest;
  for (const Row& r : rows)
    if (!newest.count(r.backend) || version_numbers(r.version) > version_numbers(newest[r.backend]))
      newest[r.backend] = r.version;
  std::map<std::string, std::string> source;
  for (const Row& r : rows) {
    if (r.version != newest[r.backend]) continue;
    std::string& s = source[r.backend];
    const bool graph = r.source.find("graph") != std::string::npos;
    if (s.empty() || (graph && s.find("graph") == std::string::npos)) s = r.source;
  }
  std::map<std::string, Measurements> out;
  for (const Row& r : rows) {
    if (r.version != newest[r.backend] || r.source != source[r.backend]) continue;
    Measurements& m = out[r.backend];
    m.source = "aiconfigurator-custom-allreduce";
    m.device = system;
    m.collectives.push_back({"all_reduce", r.gpus, 1, r.bytes, r.us});
  }
  return out;
}

std::map<int, CollectiveCalibration> fit_custom_all_reduce(const Measurements& m, const ClusterSpec& base,
                                                           const std::vector<char>& held) {
  ClusterSpec line = base;
  line.calibration = nullptr;
  line.collective_launch_us = 0.0;
  line.collective_model = "line-rate";
  SamplePredictor predict(line);
  std::map<int, std::vector<std::pair<double, double>>> by_gpus;  // (line-rate transfer us, measured us)
  std::map<int, std::vector<double>> sizes;
  for (std::size_t i = 0; i < m.collectives.size(); ++i) {
    if (!held.empty() && held[i]) continue;
    CollectiveSample s = m.collectives[i];
    const auto full = predict.us(s);
    s.bytes = 0.0;
    const auto hops = predict.us(s);
    if (!full || !hops) continue;
    by_gpus[s.gpus].emplace_back(*full - *hops, m.collectives[i].time_us);
    sizes[s.gpus].push_back(m.collectives[i].bytes);
  }
  std::map<int, CollectiveCalibration> out;
  for (const auto& [gpus, pts] : by_gpus) {
    // The launch: the smallest messages' time, where the transfer is a rounding error (the
    // tables start at 256 bytes); each size's η from what is left of its time.
    double launch = INFINITY;
    for (const auto& [k, t] : pts) launch = std::min(launch, t);
    std::map<double, std::vector<double>> eta;
    for (std::size_t j = 0; j < pts.size(); ++j) {
      const double transfer = pts[j].second - launch;
      if (pts[j].first <= 0.0 || transfer < 0.05 * pts[j].second) continue;
      eta[sizes[gpus][j]].push_back(std::clamp(pts[j].first / transfer, 0.01, 2.0));
    }
    CollectiveCalibration cal;
    cal.launch_us = launch;
    cal.hops_in_launch = true;
    for (const auto& [bytes, e] : eta) {
      cal.efficiency.x.push_back(bytes);
      cal.efficiency.y.push_back(median(e));
    }
    if (cal.efficiency.x.empty()) cal.efficiency = EfficiencyCurve{{1.0}, {1.0}};
    out[gpus] = cal;
  }
  return out;
}

std::vector<CollectiveFitScore> score_collective_fits(const Measurements& m, const ClusterSpec& base,
                                                      const std::string& base_name, double fraction,
                                                      const std::string& custom_engine) {
  const HoldoutMasks held = held_out_samples(m, fraction);
  ClusterSpec calibrated = base;
  if (custom_engine.empty()) {
    calibrated.calibration = std::make_shared<const HardwareCalibration>(fit_profile(m, base, base_name, fraction));
  } else {
    HardwareCalibration h;
    for (auto& [gpus, cal] : fit_custom_all_reduce(m, base, held.collectives))
      h.collectives[{custom_all_reduce_name(custom_engine), CollectiveScope::kIntraNode}][gpus] = cal;
    calibrated.calibration = std::make_shared<const HardwareCalibration>(std::move(h));
    calibrated.custom_all_reduce = true;
    calibrated.kernel_engine = custom_engine;
  }
  SamplePredictor fitted(calibrated), model(base);
  std::map<std::pair<std::string, int>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < m.collectives.size(); ++i) groups[{m.collectives[i].op, m.collectives[i].gpus}].push_back(i);
  std::vector<CollectiveFitScore> scores;
  for (const auto& [key, idx] : groups) {
    HeldOutErrors errors;
    for (std::size_t i : idx) {
      const CollectiveSample& c = m.collectives[i];
      const auto a = fitted.us(c);
      if (!a) continue;
      if (!held.collectives[i]) {
        errors.add_train(*a, c.time_us);
      } else if (const auto b = model.us(c)) {
        errors.add_held(*a, -1.0, *b, c.time_us);  // a measured curve has no separate physics
      }
    }
    CollectiveFitScore s;
    static_cast<HeldOutScore&>(s) = errors.score();
    s.op = key.first;
    s.gpus = key.second;
    scores.push_back(s);
  }
  return scores;
}

nlohmann::json score_json(const CollectiveFitScore& s) {
  nlohmann::json j = held_out_json(s, "model");
  j.update({{"op", s.op}, {"gpus", s.gpus}});
  return j;
}

}  // namespace moesim::calibration
