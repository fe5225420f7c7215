#pragma once
// Fitting primitives: weighted linear least squares (Eigen) and measured efficiency curves, plus
// the deterministic held-out split that `calibrate fit` and `calibrate report` share.
#include <cstddef>
#include <vector>

#include "hardware/calibration.hpp"

namespace moesim::calibration {

/// Solves min Σ w_i² (X_i·β − y_i)² for β (columns of X are the regressors). Relative-error
/// fits pass w_i = 1 / y_i. Throws std::runtime_error when there are fewer rows than columns.
std::vector<double> least_squares(const std::vector<std::vector<double>>& X, const std::vector<double>& y,
                                  const std::vector<double>& weights);

/// A curve through (x, y) points: the median y at each distinct x, in increasing x.
EfficiencyCurve median_curve(std::vector<std::pair<double, double>> points);

/// Whether the i-th of `n` samples of one class (sorted by size) is held out of the fit:
/// every round(1/fraction)-th sample, never the first or last (so held-out points are
/// interpolated, not extrapolated), none when fraction <= 0 or n < 3.
bool is_held_out(std::size_t i, std::size_t n, double fraction);

/// Mean absolute percentage error and worst relative error of predictions against truth.
struct ErrorSummary {
  std::size_t n = 0;
  double mape = 0.0;  ///< percent
  double max = 0.0;   ///< percent
  void add(double predicted, double measured);
  void finish();

 private:
  double sum_ = 0.0;
};

}  // namespace moesim::calibration
