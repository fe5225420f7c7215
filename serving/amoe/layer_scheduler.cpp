#include "serving/amoe/layer_scheduler.hpp"

#include <cmath>

namespace moesim {

bool parse_layer_schedule(const std::string& name, LayerSchedule& out) {
  if (name == "mtfs") out = LayerSchedule::kMtfs;
  else if (name == "flfs") out = LayerSchedule::kFlfs;
  else if (name == "defrag") out = LayerSchedule::kDefrag;
  else return false;
  return true;
}

std::optional<std::pair<int, int>> pick_queue(LayerSchedule s, const QueueDepths& q, const DefragParams& p) {
  const int blocks = static_cast<int>(q.size());
  std::optional<std::pair<int, int>> best;
  double best_score = 0.0;
  // Strictly greater wins, scanning blocks then slots upwards: ties go to the lowest (b, e).
  auto consider = [&](int b, int e, double score) {
    if (!best || score > best_score) {
      best = std::pair{b, e};
      best_score = score;
    }
  };
  for (int b = 0; b < blocks; ++b) {
    const auto& row = q[static_cast<std::size_t>(b)];
    double lookahead = 0.0;
    if (s == LayerSchedule::kDefrag) {
      // Algorithm 1 lines 5-10: N_e is the number of slots (expert layers) per block here.
      const double slots = static_cast<double>(row.size());
      for (int k = 1; k <= p.lookahead_blocks; ++k) {
        std::int64_t total = 0;
        for (const std::int64_t n : q[static_cast<std::size_t>((b + k) % blocks)]) total += n;
        lookahead += static_cast<double>(total) / slots * std::pow(p.decay, k);
      }
    }
    for (int e = 0; e < static_cast<int>(row.size()); ++e) {
      const std::int64_t n = row[static_cast<std::size_t>(e)];
      if (n <= 0) continue;
      consider(b, e, lookahead + static_cast<double>(n));  // mtfs and defrag (lines 11-15)
    }
    if (s == LayerSchedule::kFlfs && best) return best;  // the lowest block with tokens
  }
  return best;
}

}  // namespace moesim
