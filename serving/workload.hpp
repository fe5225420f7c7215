#pragma once
// The request-level serving workload (`workload: {kind: serving}`): how many requests arrive,
// when (an arrival process or a replayed trace), and how long their prompts and outputs are.
// Data and the deterministic generator only: the serving engine admits and times them.
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "sim/tick.hpp"

namespace moesim {

/// A token-count distribution: `prompt_tokens` or `output_tokens`. Written in YAML as an int
/// (fixed), or {dist: uniform, min, max} | {dist: normal, mean, std, min?, max?} |
/// {dist: zipf, s, min, max} (P(n) ∝ (n - min + 1)^-s on [min, max]).
struct LengthDist {
  enum class Kind { kFixed, kUniform, kNormal, kZipf };
  Kind kind = Kind::kFixed;
  std::int64_t fixed = 0;
  std::int64_t min = 1;   ///< uniform, zipf, and normal's truncation (inclusive)
  std::int64_t max = 1;   ///< uniform, zipf, and normal's truncation (inclusive)
  double mean = 0.0;      ///< normal
  double std = 0.0;       ///< normal
  double s = 1.0;         ///< zipf exponent
  /// One draw (always within [smallest(), largest()]).
  std::int64_t sample(Rng& rng) const;
  std::int64_t smallest() const;
  std::int64_t largest() const;
  double expected() const;  ///< the mean of the distribution (exact for fixed/uniform/zipf)
};

/// When requests arrive.
struct ArrivalSpec {
  enum class Process { kPoisson, kGamma, kConstant, kTrace, kClosed };
  Process process = Process::kPoisson;
  double rate_per_s = 1.0;  ///< poisson, gamma, constant
  double cv = 1.0;          ///< gamma: coefficient of variation of inter-arrival gaps
  std::string file;         ///< trace: CSV path as written (resolved against the scenario's folder)
  std::string resolved_file;///< trace: the path actually read
  int clients = 1;          ///< closed: concurrent clients, each sends its next request after
  double think_s = 0.0;     ///<   its previous one completes plus think_s seconds
};

/// `workload:` with kind serving.
struct ServingWorkload {
  std::int64_t requests = 100;
  std::int64_t warmup_requests = 0;  ///< the first requests (by id) are simulated but not measured
  ArrivalSpec arrival;
  LengthDist prompt;
  LengthDist output;
  bool prompt_cached = false;  ///< prompts already in the KV cache: decode steps only
};

/// One request as the workload defines it. Ids are 0.. in arrival order.
struct RequestSpec {
  std::int64_t id = 0;
  Tick arrival = 0;  ///< open loop: absolute arrival tick; closed loop: -1 (the driver decides)
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
};

/// Every request of an open-loop workload (poisson, gamma, constant, trace), sorted by arrival,
/// drawn from streams derived from `seed` (the same seed gives the same list). For a closed
/// loop, the requests' lengths with arrival -1. Trace rows beyond `requests` are ignored; a
/// trace with fewer rows gives fewer requests.
std::vector<RequestSpec> generate_requests(const ServingWorkload& w, std::uint64_t seed);

}  // namespace moesim
