#pragma once
// How well a fit does on the rows it was fitted to and on the rows held out of it (issue 47):
// one accumulator and one score for every kernel family, so each table's report reads the same.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moesim::calibration {

/// The median of `v` (0 when empty).
double median(std::vector<double> v);
/// The value below which a fraction `q` of `v` lies (0 when empty).
double percentile(std::vector<double> v, double q);

/// Errors in percent of the measured time: the fit's on training and held-out rows; on held-out
/// rows also its physics without the residual table and a reference (the datasheet roofline, or
/// the uncalibrated model the fit replaces), signed.
struct HeldOutScore {
  int train_rows = 0, held_rows = 0;
  double train_median = 0, held_median = 0, held_mean = 0, held_p90 = 0;
  double physics_held_median = 0;
  double reference_held_median = 0, reference_signed_median = 0;  ///< negative: the reference is too fast
};

/// Collects one fit's errors row by row and summarises them as a HeldOutScore.
class HeldOutErrors {
 public:
  void add_train(double predicted, double measured);
  /// `physics` < 0: the fit has no separate physics (its row is left out of that median).
  void add_held(double predicted, double physics, double reference, double measured);
  HeldOutScore score() const;
  double train_median() const { return median(train_); }

 private:
  std::vector<double> train_, held_, physics_, reference_, reference_signed_;
};

/// The score as JSON ("train_rows", "held_median_pct", ...), the reference's fields named
/// `<reference>_held_median_pct` and `<reference>_signed_median_pct`.
nlohmann::json held_out_json(const HeldOutScore& s, const std::string& reference);

}  // namespace moesim::calibration
