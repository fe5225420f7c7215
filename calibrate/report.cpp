#include "calibrate/report.hpp"

#include <iomanip>
#include <map>

#include "calibrate/fit.hpp"
#include "calibrate/profile.hpp"

namespace moesim::calibration {
namespace {

struct Row {
  ErrorSummary calibrated, uncalibrated;
  std::size_t skipped = 0;
};

template <typename Sample>
void score(std::map<std::string, Row>& rows, const std::string& cls, const Sample& s, SamplePredictor& cal,
           SamplePredictor& uncal) {
  const auto a = cal.us(s), b = uncal.us(s);
  Row& r = rows[cls];
  if (!a || !b || s.time_us <= 0.0) {
    ++r.skipped;
    return;
  }
  r.calibrated.add(*a, s.time_us);
  r.uncalibrated.add(*b, s.time_us);
}

}  // namespace

nlohmann::json calibration_report(const ClusterSpec& calibrated, const ClusterSpec& uncalibrated,
                                  const Measurements& m) {
  const double holdout = calibrated.calibration ? calibrated.calibration->holdout : 0.0;
  const HoldoutMasks held = held_out_samples(m, holdout);
  auto evaluated = [&](const std::vector<char>& mask, std::size_t i) { return holdout <= 0.0 || mask[i]; };
  SamplePredictor cal(calibrated), uncal(uncalibrated);
  std::map<std::string, Row> rows;
  for (std::size_t i = 0; i < m.gemm.size(); ++i)
    if (evaluated(held.gemm, i))
      score(rows, (m.gemm[i].group_m.empty() ? "gemm " : "grouped_gemm ") + m.gemm[i].dtype, m.gemm[i], cal, uncal);
  for (std::size_t i = 0; i < m.collectives.size(); ++i) {
    if (!evaluated(held.collectives, i)) continue;
    const auto& s = m.collectives[i];
    score(rows, s.op + (s.nodes > 1 ? " inter " : " intra ") + std::to_string(s.gpus), s, cal, uncal);
  }
  for (std::size_t i = 0; i < m.memcpy.size(); ++i)
    if (evaluated(held.memcpy, i)) score(rows, "memcpy " + m.memcpy[i].kind, m.memcpy[i], cal, uncal);

  nlohmann::json out;
  out["samples"] = holdout > 0.0 ? "held-out" : "all (profile fitted without a hold-out)";
  out["holdout"] = holdout;
  out["classes"] = nlohmann::json::array();
  for (auto& [cls, r] : rows) {
    r.calibrated.finish();
    r.uncalibrated.finish();
    out["classes"].push_back({{"class", cls},
                              {"samples", r.calibrated.n},
                              {"skipped", r.skipped},
                              {"calibrated", {{"mape_pct", r.calibrated.mape}, {"max_pct", r.calibrated.max}}},
                              {"uncalibrated", {{"mape_pct", r.uncalibrated.mape}, {"max_pct", r.uncalibrated.max}}}});
  }
  return out;
}

void print_report(std::ostream& os, const nlohmann::json& report) {
  os << "error on " << report["samples"].get<std::string>() << " samples\n";
  os << std::left << std::setw(28) << "class" << std::right << std::setw(8) << "samples" << std::setw(14)
     << "calib. MAPE" << std::setw(12) << "calib. max" << std::setw(14) << "preset MAPE" << std::setw(12)
     << "preset max" << "\n";
  os << std::fixed << std::setprecision(1);
  for (const auto& c : report["classes"]) {
    os << std::left << std::setw(28) << c["class"].get<std::string>() << std::right << std::setw(8)
       << c["samples"].get<std::size_t>() << std::setw(13) << c["calibrated"]["mape_pct"].get<double>() << "%"
       << std::setw(11) << c["calibrated"]["max_pct"].get<double>() << "%" << std::setw(13)
       << c["uncalibrated"]["mape_pct"].get<double>() << "%" << std::setw(11)
       << c["uncalibrated"]["max_pct"].get<double>() << "%";
    if (c["skipped"].get<std::size_t>() > 0) os << "  (" << c["skipped"].get<std::size_t>() << " not expressible)";
    os << "\n";
  }
}

}  // namespace moesim::calibration
