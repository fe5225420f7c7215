#pragma once
// Builds a calibration profile from measurements, and predicts each measured sample with a
// (calibrated or uncalibrated) hardware description — the fitter and the report share these.
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "calibrate/measurements.hpp"
#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"

namespace moesim::calibration {

/// Fits GEMM efficiency curves per (dtype, n, k), the default curve's η_c and η_m, collective
/// launch costs and size-dependent efficiencies per (op, scope, GPU count), and host-link
/// latency/bandwidth per memcpy kind. Samples that `is_held_out` are left out of every fit.
HardwareCalibration fit_profile(const Measurements& m, const ClusterSpec& base, const std::string& base_name,
                                double holdout);

/// Which samples are held out (one flag per sample, in each list's order): within each class
/// (GEMM shape, memcpy kind, collective op/scope/GPU count) sorted by size, `is_held_out`.
struct HoldoutMasks {
  std::vector<char> gemm, memcpy, collectives;
};
HoldoutMasks held_out_samples(const Measurements& m, double fraction);

/// The cluster a collective sample ran on, derived from `base` (same GPUs and links, the
/// sample's node count and GPUs per node). nullopt if that topology is not buildable.
std::optional<ClusterSpec> cluster_for(const ClusterSpec& base, const CollectiveSample& s);

/// Predicts measured samples on one hardware description (calibrated or not), in microseconds;
/// nullopt when a sample cannot be expressed there (e.g. more GPUs than the topology has).
class SamplePredictor {
 public:
  explicit SamplePredictor(ClusterSpec spec);
  std::optional<double> us(const GemmSample& s) const;
  std::optional<double> us(const CollectiveSample& s);
  std::optional<double> us(const MemcpySample& s);

 private:
  const Cluster* cluster(const CollectiveSample& s);
  ClusterSpec spec_;
  ComputeCostModel cost_;
  std::map<std::pair<int, int>, std::unique_ptr<Cluster>> clusters_;  ///< by (nodes, GPUs)
};

}  // namespace moesim::calibration
