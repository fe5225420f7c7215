#include "serving/workload.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "serving/request_trace.hpp"

namespace moesim {
namespace {

// Draws: one stream for the arrival gaps, one per (request, length) (core/rng_streams.hpp).
constexpr std::uint64_t kPromptLength = 1;
constexpr std::uint64_t kOutputLength = 2;

// Uniform in (0, 1): never 0 or 1, so logs and powers are finite.
double open01(Rng& rng) { return (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53; }

// Standard normal by Box–Muller (one of the pair; the other is discarded to keep draws per
// call fixed).
double standard_normal(Rng& rng) {
  const double u1 = open01(rng);
  const double u2 = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(shape, 1) by Marsaglia & Tsang (2000), "A simple method for generating gamma variables";
// for shape < 1, Gamma(shape + 1) · U^(1/shape).
double standard_gamma(Rng& rng, double shape) {
  if (shape < 1.0) return standard_gamma(rng, shape + 1.0) * std::pow(open01(rng), 1.0 / shape);
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = 0.0, v = 0.0;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = open01(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

// Zipf on {1, ..., n} with P(k) ∝ k^-s, s > 0, by rejection-inversion (Hörmann & Derflinger
// 1996, "Rejection-inversion to generate variates from monotone discrete distributions"), as
// Apache Commons RNG's RejectionInversionZipfSampler: O(1) per draw for any n.
class ZipfSampler {
 public:
  ZipfSampler(std::int64_t n, double s) : n_(static_cast<double>(n)), s_(s) {
    h_integral_x1_ = h_integral(1.5) - 1.0;
    h_integral_n_ = h_integral(n_ + 0.5);
    shift_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
  }
  std::int64_t sample(Rng& rng) const {
    while (true) {
      const double u = h_integral_n_ + rng.uniform01() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      double k = std::floor(x + 0.5);
      k = std::clamp(k, 1.0, n_);
      if (k - x <= shift_ || u >= h_integral(k + 0.5) - h(k)) return static_cast<std::int64_t>(k);
    }
  }

 private:
  static double helper1(double x) {  // log1p(x) / x
    return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) {  // expm1(x) / x
    return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
  }
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double h_integral(double x) const {
    const double log_x = std::log(x);
    return helper2((1.0 - s_) * log_x) * log_x;
  }
  double h_integral_inverse(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;
    return std::exp(helper1(t) * x);
  }
  double n_, s_;
  double h_integral_x1_ = 0.0, h_integral_n_ = 0.0, shift_ = 0.0;
};

// Upper truncation of a normal length whose `max` is 0 (not given): mean + 4 std, rounded up.
std::int64_t normal_upper(const LengthDist& d) {
  return d.max > 0 ? d.max : std::max(d.min, static_cast<std::int64_t>(std::ceil(d.mean + 4.0 * d.std)));
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }
double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi); }

// An arrival time in (fractional) ticks to the nearest tick, through the same range check as
// every other duration: a trace row at 1e7 s or a rate of 1e-300 per second puts arrivals past
// simulated time's range, an input too extreme to simulate (TimeRangeError), not a wrapped tick.
Tick arrival_tick(double ticks, std::int64_t request) {
  if (!(ticks <= static_cast<double>(kTickLimit)))  // also NaN
    throw TimeRangeError("request " + std::to_string(request) + " would arrive at " + std::to_string(ticks * 1e-12) +
                         " s, beyond the simulated time range (~53 days)");
  return static_cast<Tick>(std::llround(ticks));
}

Tick seconds_to_tick_rounded(double s, std::int64_t request) {
  return arrival_tick(s * static_cast<double>(kPsPerS), request);
}

}  // namespace

std::int64_t LengthDist::sample(Rng& rng) const {
  switch (kind) {
    case Kind::kFixed: return fixed;
    case Kind::kUniform: return min + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(max - min + 1)));
    case Kind::kNormal: {
      // Rounded, truncated to [min, max] by rejection; after many misses (the range holds
      // almost none of the mass) the nearest bound.
      const std::int64_t hi = normal_upper(*this);
      double v = mean;
      for (int tries = 0; tries < 1000; ++tries) {
        v = std::round(mean + std * standard_normal(rng));
        if (v >= static_cast<double>(min) && v <= static_cast<double>(hi)) return static_cast<std::int64_t>(v);
      }
      return v < static_cast<double>(min) ? min : hi;
    }
    case Kind::kZipf: return min - 1 + ZipfSampler(max - min + 1, s).sample(rng);
  }
  return fixed;
}

std::int64_t LengthDist::smallest() const { return kind == Kind::kFixed ? fixed : min; }

std::int64_t LengthDist::largest() const {
  switch (kind) {
    case Kind::kFixed: return fixed;
    case Kind::kNormal: return normal_upper(*this);
    default: return max;
  }
}

double LengthDist::expected() const {
  switch (kind) {
    case Kind::kFixed: return static_cast<double>(fixed);
    case Kind::kUniform: return 0.5 * static_cast<double>(min + max);
    case Kind::kNormal: {
      // The rounded normal truncated to [min, max] ≈ the continuous one on [min - ½, max + ½].
      if (std <= 0.0) return std::clamp(std::round(mean), static_cast<double>(min), static_cast<double>(largest()));
      const double a = (static_cast<double>(min) - 0.5 - mean) / std;
      const double b = (static_cast<double>(largest()) + 0.5 - mean) / std;
      const double mass = normal_cdf(b) - normal_cdf(a);
      if (mass < 1e-12) return mean < static_cast<double>(min) ? static_cast<double>(min) : static_cast<double>(largest());
      return mean + std * (normal_pdf(a) - normal_pdf(b)) / mass;
    }
    case Kind::kZipf: {
      // Σ k^-s (min - 1 + k) / Σ k^-s over k = 1..n: exact up to 2M terms, then the tail by
      // integrals (midpoint rule, error far below a token).
      const std::int64_t n = max - min + 1;
      const std::int64_t exact = std::min<std::int64_t>(n, 2'000'000);
      double z = 0.0, zk = 0.0;
      for (std::int64_t k = 1; k <= exact; ++k) {
        const double w = std::pow(static_cast<double>(k), -s);
        z += w;
        zk += w * static_cast<double>(k);
      }
      if (n > exact) {
        const double lo = static_cast<double>(exact) + 0.5, hi = static_cast<double>(n) + 0.5;
        auto integral = [](double p, double x0, double x1) {  // ∫ x^p dx
          return std::fabs(p + 1.0) < 1e-12 ? std::log(x1 / x0)
                                            : (std::pow(x1, p + 1.0) - std::pow(x0, p + 1.0)) / (p + 1.0);
        };
        z += integral(-s, lo, hi);
        zk += integral(1.0 - s, lo, hi);
      }
      return static_cast<double>(min - 1) + zk / z;
    }
  }
  return 0.0;
}

std::vector<RequestSpec> generate_requests(const ServingWorkload& w, std::uint64_t seed) {
  std::vector<RequestSpec> out;
  const ArrivalSpec& a = w.arrival;
  if (a.process == ArrivalSpec::Process::kTrace) {
    const std::vector<TraceRequest> rows = read_request_trace(a.resolved_file.empty() ? a.file : a.resolved_file);
    const std::size_t n = std::min(rows.size(), static_cast<std::size_t>(std::max<std::int64_t>(w.requests, 0)));
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      out.push_back(RequestSpec{static_cast<std::int64_t>(i),
                                seconds_to_tick_rounded(rows[i].arrived_at_s, static_cast<std::int64_t>(i)),
                                rows[i].prompt_tokens, rows[i].output_tokens});
    return out;
  }
  out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(w.requests, 0)));
  Rng gaps = Rng::derive(seed, Stream::kArrivalGaps);
  const double shape = 1.0 / (a.cv * a.cv);  // gamma: mean shape·scale = 1/rate, cv = 1/√shape
  const double scale = 1.0 / (a.rate_per_s * shape);
  double t = 0.0;  // seconds
  for (std::int64_t i = 0; i < w.requests; ++i) {
    RequestSpec r;
    r.id = i;
    switch (a.process) {
      case ArrivalSpec::Process::kPoisson:
        t += -std::log(open01(gaps)) / a.rate_per_s;
        r.arrival = seconds_to_tick_rounded(t, i);
        break;
      case ArrivalSpec::Process::kGamma:
        t += scale * standard_gamma(gaps, shape);
        r.arrival = seconds_to_tick_rounded(t, i);
        break;
      case ArrivalSpec::Process::kConstant:
        r.arrival = arrival_tick(static_cast<double>(i) * static_cast<double>(kPsPerS) / a.rate_per_s, i);
        break;
      default: r.arrival = -1; break;  // closed loop: the driver decides
    }
    Rng prompt_rng = Rng::derive(seed, Stream::kRequestLengths, static_cast<std::uint64_t>(i), kPromptLength);
    Rng output_rng = Rng::derive(seed, Stream::kRequestLengths, static_cast<std::uint64_t>(i), kOutputLength);
    r.prompt_tokens = w.prompt.sample(prompt_rng);
    r.output_tokens = w.output.sample(output_rng);
    out.push_back(r);
  }
  return out;
}

}  // namespace moesim
