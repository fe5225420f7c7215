#include "calibrate/held_out_score.hpp"

#include <algorithm>
#include <cmath>

namespace moesim::calibration {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

void HeldOutErrors::add_train(double predicted, double measured) {
  train_.push_back(std::abs(predicted / measured - 1.0) * 100.0);
}

void HeldOutErrors::add_held(double predicted, double physics, double reference, double measured) {
  held_.push_back(std::abs(predicted / measured - 1.0) * 100.0);
  if (physics >= 0.0) physics_.push_back(std::abs(physics / measured - 1.0) * 100.0);
  reference_.push_back(std::abs(reference / measured - 1.0) * 100.0);
  reference_signed_.push_back((reference / measured - 1.0) * 100.0);
}

HeldOutScore HeldOutErrors::score() const {
  HeldOutScore s;
  s.train_rows = static_cast<int>(train_.size());
  s.held_rows = static_cast<int>(held_.size());
  s.train_median = median(train_);
  s.held_median = median(held_);
  double sum = 0.0;
  for (double e : held_) sum += e;
  s.held_mean = held_.empty() ? 0.0 : sum / static_cast<double>(held_.size());
  s.held_p90 = percentile(held_, 0.9);
  s.physics_held_median = median(physics_);
  s.reference_held_median = median(reference_);
  s.reference_signed_median = median(reference_signed_);
  return s;
}

nlohmann::json held_out_json(const HeldOutScore& s, const std::string& reference) {
  return {{"train_rows", s.train_rows},
          {"held_rows", s.held_rows},
          {"train_median_pct", s.train_median},
          {"held_median_pct", s.held_median},
          {"held_mean_pct", s.held_mean},
          {"held_p90_pct", s.held_p90},
          {"physics_held_median_pct", s.physics_held_median},
          {reference + "_held_median_pct", s.reference_held_median},
          {reference + "_signed_median_pct", s.reference_signed_median}};
}

}  // namespace moesim::calibration
