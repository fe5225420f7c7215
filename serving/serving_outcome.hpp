#pragma once
// What a finished serving run reports to the metrics (the serving engine, serving/engine.hpp, in
// any of its modes).
#include <cstdint>
#include <vector>

#include "serving/request.hpp"
#include "sim/tick.hpp"

namespace moesim {

/// A serving run's requests and run-wide figures.
class ServingOutcome {
 public:
  virtual ~ServingOutcome() = default;
  virtual const std::vector<Request>& requests() const = 0;
  /// The distinct inter-token gaps its requests' `itl` ids refer to.
  virtual const InterTokenGaps& inter_token_gaps() const = 0;
  /// Peak share of KV blocks in use on any GPU.
  virtual double kv_cache_peak_fraction() const = 0;
  virtual std::int64_t preemptions() const = 0;
  /// The simulated time when the run ended.
  virtual Tick now() const = 0;
};

}  // namespace moesim
