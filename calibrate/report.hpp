#pragma once
// `moesim calibrate report`: per op class, the error of the calibrated profile and of the
// uncalibrated preset on the samples the fit did not see.
#include <ostream>

#include <nlohmann/json.hpp>

#include "calibrate/measurements.hpp"
#include "hardware/cluster.hpp"

namespace moesim::calibration {

/// Evaluates `calibrated` and `uncalibrated` on the held-out samples of `m` (all samples when
/// the profile was fitted without a hold-out). One row per class: "gemm fp16",
/// "all_reduce intra 8", "memcpy h2d_pinned", ...
nlohmann::json calibration_report(const ClusterSpec& calibrated, const ClusterSpec& uncalibrated,
                                  const Measurements& m);
/// The report as an aligned table.
void print_report(std::ostream& os, const nlohmann::json& report);

}  // namespace moesim::calibration
