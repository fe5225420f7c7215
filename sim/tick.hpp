#pragma once
// Simulated time: integer picoseconds. Units are converted only at the edges (YAML in, JSON out).
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace moesim {

/// A point or span of simulated time in picoseconds (int64: ~106 days of range).
using Tick = std::int64_t;

inline constexpr Tick kPsPerNs = 1'000;
inline constexpr Tick kPsPerUs = 1'000'000;
inline constexpr Tick kPsPerMs = 1'000'000'000;
inline constexpr Tick kPsPerS = 1'000'000'000'000;
inline constexpr Tick kTickMax = std::numeric_limits<Tick>::max();

/// The latest simulated time: 2^62 ps (~53 days). Any two times below it add without overflow,
/// so a time past it is detected before it wraps.
inline constexpr Tick kTickLimit = Tick{1} << 62;

/// A duration or time beyond kTickLimit (or not a number): an input is too extreme to simulate
/// (a bandwidth near zero, a launch cost of years, 1e20 bytes). Reported as an input error.
class TimeRangeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A duration in (fractional) ticks to Tick, rounded up; throws TimeRangeError past the limit.
inline Tick checked_ticks(double ticks) {
  if (!(ticks <= static_cast<double>(kTickLimit)))  // also NaN
    throw TimeRangeError("a duration of " + std::to_string(ticks * 1e-12) +
                         " s is beyond the simulated time range (~53 days)");
  if (ticks <= 0.0) return 0;
  return static_cast<Tick>(std::ceil(ticks));
}

/// Seconds (double) to ticks, rounding up so a positive duration never becomes zero.
inline Tick seconds_to_ticks(double s) { return checked_ticks(s * static_cast<double>(kPsPerS)); }

/// now + span, both within the range; throws TimeRangeError when the sum passes the limit.
inline Tick checked_add(Tick now, Tick span) {
  if (span > kTickLimit - now) throw TimeRangeError("simulated time passed its range (~53 days)");
  return now + span;
}
inline Tick us_to_ticks(double us) { return seconds_to_ticks(us * 1e-6); }
inline Tick ms_to_ticks(double ms) { return seconds_to_ticks(ms * 1e-3); }
inline double ticks_to_seconds(Tick t) { return static_cast<double>(t) / static_cast<double>(kPsPerS); }
inline double ticks_to_ms(Tick t) { return static_cast<double>(t) / static_cast<double>(kPsPerMs); }
inline double ticks_to_us(Tick t) { return static_cast<double>(t) / static_cast<double>(kPsPerUs); }

}  // namespace moesim
