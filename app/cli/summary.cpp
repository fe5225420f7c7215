#include "app/cli/summary.hpp"

#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace moesim {

namespace {

std::string fixed(double v, int prec) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

/// Prints `rows` under `head` in aligned columns; the first two are text (left-aligned).
void print_table(std::ostream& os, const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c == 0 || c == 1) os << std::left << std::setw(static_cast<int>(width[c])) << cells[c];
      else os << std::right << std::setw(static_cast<int>(width[c])) << cells[c];
      os << (c + 1 < cells.size() ? "  " : "\n");
    }
  };
  line(head);
  for (const auto& row : rows) line(row);
}

/// "2 nodes x 8 GPUs" (or "8 GPUs" on one node), from the resolved hardware section.
std::string cluster_size(const nlohmann::json& hw) {
  const auto nodes = hw["nodes"].get<long long>(), per = hw["gpus_per_node"].get<long long>();
  const std::string gpus = std::to_string(per) + (per == 1 ? " GPU" : " GPUs");
  return nodes == 1 ? gpus : std::to_string(nodes) + " nodes x " + gpus;
}

/// A serving run's table: latencies per request (mean and p99), throughput, load.
void print_serving_summary(std::ostream& os, const nlohmann::json& result) {
  const auto& sc = result["scenario"];
  const auto& wl = sc["workload"];
  os << "scenario " << sc["name"].get<std::string>() << ": " << sc["model"]["name"].get<std::string>() << " on "
     << sc["hardware"]["name"].get<std::string>() << " (" << cluster_size(sc["hardware"]) << "), serving " << wl["requests"] << " requests ("
     << wl["arrival"]["process"].get<std::string>() << " arrivals), routing " << wl["routing"]["kind"].get<std::string>()
     << "\n\n";
  const std::vector<std::string> head = {"label", "predictor", "TTFT ms", "TTFT p99", "TPOT ms", "TPOT p99", "ITL p99",
                                         "e2e ms", "queue ms", "out tok/s", "req/s", "preempt", "KV peak %", "idle %"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : result["runs"]) {
    const auto& m = r["metrics"];
    rows.push_back({r["label"].get<std::string>(), r["predictor_label"].get<std::string>(),
                    fixed(m["ttft_ms"]["mean"].get<double>(), 1), fixed(m["ttft_ms"]["p99"].get<double>(), 1),
                    fixed(m["tpot_ms"]["mean"].get<double>(), 2), fixed(m["tpot_ms"]["p99"].get<double>(), 2),
                    fixed(m["itl_ms"]["p99"].get<double>(), 2), fixed(m["e2e_ms"]["mean"].get<double>(), 1),
                    fixed(m["queue_delay_ms"]["mean"].get<double>(), 1),
                    fixed(m["throughput_tokens_per_s"].get<double>(), 0), fixed(m["request_rate_per_s"].get<double>(), 2),
                    std::to_string(m["preemptions"].get<long long>()),
                    fixed(100.0 * m["kv_cache_peak_fraction"].get<double>(), 1),
                    fixed(100.0 * m["gpu_idle_fraction"]["mean"].get<double>(), 1)});
  }
  print_table(os, head, rows);
}

}  // namespace

void print_summary(std::ostream& os, const nlohmann::json& result) {
  const auto& sc = result["scenario"];
  if (sc["workload"]["kind"] == "serving") {
    print_serving_summary(os, result);
    return;
  }
  os << "scenario " << sc["name"].get<std::string>() << ": " << sc["model"]["name"].get<std::string>() << " on "
     << sc["hardware"]["name"].get<std::string>() << " (" << cluster_size(sc["hardware"]) << "), "
     << sc["workload"]["batches"] << " batch(es) of "
     << sc["workload"]["batch_size"] << " x " << sc["workload"]["seq_len"] << " tokens, routing "
     << sc["workload"]["routing"]["kind"].get<std::string>() << "\n\n";
  // "wait %" is the breakdown's waiting (HarMoEny Fig. 9): idle time not spent communicating or
  // scheduling either.
  // "pred ms" and "pred err" are the predictor's overhead per MoE layer and its error ε (MoE-GPS
  // §3.2–3.3); the overhead is already inside "layer ms".
  const std::vector<std::string> head = {"label",  "predictor", "layer ms", "p99 ms",       "TTFT ms", "tok/s",
                                         "idle %", "wait %",    "a2a ms",   "skew",         "gpu max/mean",
                                         "pred ms", "pred err", "dropped"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : result["runs"]) {
    const auto& m = r["metrics"];
    rows.push_back({r["label"].get<std::string>(), r["predictor_label"].get<std::string>(),
                    fixed(m["layer_latency_ms"]["mean"].get<double>(), 3),
                    fixed(m["layer_latency_ms"]["p99"].get<double>(), 3), fixed(m["ttft_ms"]["mean"].get<double>(), 3),
                    fixed(m["throughput_tokens_per_s"].get<double>(), 0),
                    fixed(100.0 * m["gpu_idle_fraction"]["mean"].get<double>(), 1),
                    fixed(100.0 * m["gpu_time_breakdown"]["mean_fraction"]["waiting"].get<double>(), 1),
                    fixed(m["alltoall_ms"].get<double>(), 3), fixed(m["load"]["skewness"].get<double>(), 2),
                    fixed(m["load"]["gpu_max_over_mean"].get<double>(), 2),
                    fixed(m["predictor_overhead_ms"].get<double>(), 3), fixed(m["prediction_error"].get<double>(), 3),
                    std::to_string(m["tokens_dropped"].get<long long>())});
  }
  print_table(os, head, rows);
}

}  // namespace moesim
