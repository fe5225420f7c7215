#pragma once
// Levenberg-Marquardt least squares with a forward-difference Jacobian (Eigen): the fitter of the
// kernel families' few physical parameters on log time.
#include <algorithm>
#include <functional>

#include <Eigen/Dense>

namespace moesim::calibration {

/// Minimises |r(x)|² from `x` (updated in place); `r` maps parameters to residuals and may
/// return non-finite values for a step that leaves the physical range (the step is refused).
/// Returns the final sum of squares.
inline double levenberg_marquardt(Eigen::VectorXd& x, const std::function<Eigen::VectorXd(const Eigen::VectorXd&)>& r,
                                  int max_iterations = 200) {
  Eigen::VectorXd res = r(x);
  double sse = res.squaredNorm();
  double lambda = 1e-3;
  const Eigen::Index n = x.size();
  for (int iter = 0; iter < max_iterations; ++iter) {
    Eigen::MatrixXd J(res.size(), n);
    for (Eigen::Index p = 0; p < n; ++p) {
      Eigen::VectorXd xp = x;
      xp[p] += 1e-6;
      J.col(p) = (r(xp) - res) / 1e-6;
    }
    const Eigen::MatrixXd A = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * res;
    bool improved = false;
    for (int tries = 0; tries < 20 && !improved; ++tries) {
      Eigen::MatrixXd D = A;
      for (Eigen::Index p = 0; p < n; ++p) D(p, p) += lambda * std::max(A(p, p), 1e-12);
      const Eigen::VectorXd xn = x + D.ldlt().solve(-g);
      const Eigen::VectorXd rn = r(xn);
      if (rn.allFinite() && rn.squaredNorm() < sse) {
        const double gain = sse - rn.squaredNorm();
        x = xn, res = rn, sse = rn.squaredNorm();
        lambda = std::max(lambda / 3.0, 1e-9);
        improved = true;
        if (gain < 1e-12 * std::max(1.0, sse)) return sse;
      } else {
        lambda *= 4.0;
      }
    }
    if (!improved) break;
  }
  return sse;
}

}  // namespace moesim::calibration
