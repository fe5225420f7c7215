#include "calibrate/fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace moesim::calibration {

std::vector<double> least_squares(const std::vector<std::vector<double>>& X, const std::vector<double>& y,
                                  const std::vector<double>& weights) {
  const auto rows = static_cast<Eigen::Index>(X.size());
  const auto cols = rows ? static_cast<Eigen::Index>(X.front().size()) : 0;
  if (rows < cols || cols == 0) throw std::runtime_error("least squares needs at least as many samples as parameters");
  Eigen::MatrixXd A(rows, cols);
  Eigen::VectorXd b(rows);
  for (Eigen::Index r = 0; r < rows; ++r) {
    const double w = weights.empty() ? 1.0 : weights[static_cast<std::size_t>(r)];
    for (Eigen::Index c = 0; c < cols; ++c) A(r, c) = w * X[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
    b(r) = w * y[static_cast<std::size_t>(r)];
  }
  // Column-pivoting QR: robust when a regressor is nearly constant (e.g. all sizes tiny).
  const Eigen::VectorXd beta = A.colPivHouseholderQr().solve(b);
  return std::vector<double>(beta.data(), beta.data() + beta.size());
}

EfficiencyCurve median_curve(std::vector<std::pair<double, double>> points) {
  std::map<double, std::vector<double>> by_x;
  for (const auto& [x, y] : points) by_x[x].push_back(y);
  EfficiencyCurve c;
  for (auto& [x, ys] : by_x) {
    std::sort(ys.begin(), ys.end());
    const std::size_t n = ys.size();
    c.x.push_back(x);
    c.y.push_back(n % 2 ? ys[n / 2] : 0.5 * (ys[n / 2 - 1] + ys[n / 2]));
  }
  return c;
}

bool is_held_out(std::size_t i, std::size_t n, double fraction) {
  if (fraction <= 0.0 || n < 3 || i == 0 || i + 1 == n) return false;
  const auto period = static_cast<std::size_t>(std::max(2.0, std::round(1.0 / fraction)));
  return i % period == period / 2;
}

void ErrorSummary::add(double predicted, double measured) {
  const double e = 100.0 * std::fabs(predicted - measured) / measured;
  sum_ += e;
  max = std::max(max, e);
  ++n;
}

void ErrorSummary::finish() { mape = n ? sum_ / static_cast<double>(n) : 0.0; }

}  // namespace moesim::calibration
