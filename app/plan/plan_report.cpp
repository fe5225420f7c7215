// `moesim plan`'s outputs (app/plan.hpp): plan.csv, the terminal table.
#include <iomanip>
#include <sstream>

#include "app/plan/plan.hpp"
#include "app/sweep/sweep.hpp"

namespace moesim {
namespace {

std::string num(double v) { return format_number(v); }

// A metric of the probe, or "" when the run has none.
std::string metric(const std::optional<PlanProbe>& p, const char* key, const char* sub = nullptr) {
  if (!p) return "";
  const nlohmann::json* j = &p->metrics;
  if (!j->contains(key)) return "";
  j = &(*j)[key];
  if (sub) {
    if (!j->is_object() || !j->contains(sub)) return "";
    j = &(*j)[sub];
  }
  return j->is_number() ? num(j->get<double>()) : "";
}

double value_of(const std::optional<PlanProbe>& p, const char* key, const char* sub = nullptr) {
  if (!p || !p->metrics.contains(key)) return 0.0;
  const nlohmann::json& j = p->metrics[key];
  if (sub) return j.is_object() ? j.value(sub, 0.0) : 0.0;
  return j.is_number() ? j.get<double>() : 0.0;
}

std::vector<std::size_t> ranks(const PlanOutcome& o) {
  std::vector<std::size_t> rank(o.rows.size(), 0);
  for (std::size_t r = 0; r < o.ranking.size(); ++r) rank[o.ranking[r]] = r + 1;
  return rank;
}

}  // namespace

std::string plan_csv(const PlanSpec& spec, const PlanOutcome& o) {
  std::ostringstream os;
  os << "candidate,rank,label,status,gpus,disaggregated,tensor_parallel,data_parallel,expert_parallel,"
        "prefill_gpus,prefill_tensor_parallel,prefill_data_parallel,decode_gpus,decode_tensor_parallel,"
        "decode_data_parallel,policy,max_num_seqs,max_batched_tokens,two_batch_overlap,probes,"
     << o.load_key << ",slo_attainment,goodput_per_gpu,throughput_per_gpu,tokens_per_user,ttft_ms_p90,tpot_ms_p90,"
        "usd_per_mtok,reason\n";
  const std::vector<std::size_t> rank = ranks(o);
  for (std::size_t i = 0; i < o.rows.size(); ++i) {
    const PlanRow& r = o.rows[i];
    const PlanCandidate& c = r.candidate;
    const std::optional<PlanProbe>& p = r.best ? r.best : r.closest;
    os << c.index << "," << (rank[i] ? std::to_string(rank[i]) : "") << "," << csv_field(c.label()) << "," << r.status
       << "," << c.gpus << "," << (c.disaggregated ? "true" : "false") << ",";
    if (c.scenario) {
      os << ",,,,,,,,,,,,,";
    } else {
      if (c.disaggregated)
        os << ",,,";
      else
        os << c.colocated.tensor_parallel << "," << c.colocated.data_parallel << ","
           << (c.colocated.expert_parallel ? "true" : "false") << ",";
      if (c.disaggregated)
        os << c.prefill.gpus() << "," << c.prefill.tensor_parallel << "," << c.prefill.data_parallel << ","
           << c.decode.gpus() << "," << c.decode.tensor_parallel << "," << c.decode.data_parallel << ",";
      else
        os << ",,,,,,";
      os << c.policy << "," << c.max_num_seqs << "," << c.max_batched_tokens << ","
         << (c.two_batch_overlap ? "true" : "false") << ",";
    }
    const int gpus = std::max(1, c.gpus);
    const double thr = r.best ? r.best->throughput : 0.0;
    const double tpot = value_of(r.best, "tpot_ms", "mean");
    os << r.probes << "," << (p ? num(p->load) : "") << "," << (p ? num(p->attainment) : "") << ","
       << (r.best ? num(r.best->goodput / gpus) : "") << ","
       << (r.best ? num(thr / gpus) : "") << "," << (r.best && tpot > 0 ? num(1e3 / tpot) : "") << ","
       << metric(p, "ttft_ms", "p90") << "," << metric(p, "tpot_ms", "p90") << ","
       << (r.best && spec.gpu_hour_cost > 0 && thr > 0 ? num(gpus * spec.gpu_hour_cost / 3600.0 / thr * 1e6) : "")
       << "," << csv_field(r.reason) << "\n";
  }
  return os.str();
}

std::string plan_table(const PlanSpec& spec, const PlanOutcome& o, std::size_t top) {
  std::ostringstream os;
  const std::string load = o.load_key.substr(o.load_key.rfind('.') + 1);
  os << std::left << std::setw(5) << "rank" << std::setw(56) << "deployment" << std::right << std::setw(10) << load
     << std::setw(14) << "goodput/GPU" << std::setw(12) << "tok/s/GPU" << std::setw(11) << "tok/s/user"
     << std::setw(11) << "TTFT p90" << std::setw(11) << "TPOT p90";
  if (spec.gpu_hour_cost > 0) os << std::setw(10) << "$/Mtok";
  os << "\n";
  const auto line = [&](const std::string& rank, const PlanRow& r) {
    const int gpus = std::max(1, r.candidate.gpus);
    const double thr = r.best ? r.best->throughput : 0.0;
    const double tpot = value_of(r.best, "tpot_ms", "mean");
    std::string label = r.candidate.scenario ? "the scenario's deployment (" + std::to_string(gpus) + " GPU)"
                                             : r.candidate.label();
    if (label.size() > 54) label = label.substr(0, 53) + "~";
    os << std::left << std::setw(5) << rank << std::setw(56) << label << std::right << std::fixed;
    if (!r.best) {
      os << "  " << (r.status == "ran" ? "meets the SLO at no load tried" : r.status + ": " + r.reason) << "\n";
      return;
    }
    os << std::setw(10) << std::setprecision(o.load_key.ends_with("clients") ? 0 : 2) << r.best->load
       << std::setw(14) << std::setprecision(3) << r.best->goodput / gpus << std::setw(12)
       << std::setprecision(0) << thr / gpus << std::setw(11) << std::setprecision(1) << (tpot > 0 ? 1e3 / tpot : 0.0)
       << std::setw(11) << std::setprecision(1) << value_of(r.best, "ttft_ms", "p90") << std::setw(11)
       << value_of(r.best, "tpot_ms", "p90");
    if (spec.gpu_hour_cost > 0) os << std::setw(10) << std::setprecision(3) << gpus * spec.gpu_hour_cost / 3600.0 / thr * 1e6;
    os << "\n";
  };
  for (std::size_t k = 0; k < o.ranking.size() && k < top; ++k) line(std::to_string(k + 1), o.rows[o.ranking[k]]);
  bool scenario_ranked = false;
  for (std::size_t k = 0; k < o.ranking.size() && k < top; ++k) scenario_ranked |= o.ranking[k] == 0;
  if (!scenario_ranked) line("-", o.rows[0]);
  return os.str();
}

}  // namespace moesim
