#pragma once
// Simulated time: integer picoseconds. Units are converted only at the edges (YAML in, JSON out).
#include <cmath>
#include <cstdint>
#include <limits>

namespace moesim {

/// A point or span of simulated time in picoseconds (int64: ~106 days of range).
using Tick = std::int64_t;

inline constexpr Tick kPsPerNs = 1'000;
inline constexpr Tick kPsPerUs = 1'000'000;
inline constexpr Tick kPsPerMs = 1'000'000'000;
inline constexpr Tick kPsPerS = 1'000'000'000'000;
inline constexpr Tick kTickMax = std::numeric_limits<Tick>::max();

/// Seconds (double) to ticks, rounding up so a positive duration never becomes zero.
inline Tick seconds_to_ticks(double s) {
  if (s <= 0.0) return 0;
  return static_cast<Tick>(std::ceil(s * static_cast<double>(kPsPerS)));
}
inline Tick us_to_ticks(double us) { return seconds_to_ticks(us * 1e-6); }
inline Tick ms_to_ticks(double ms) { return seconds_to_ticks(ms * 1e-3); }
inline double ticks_to_seconds(Tick t) { return static_cast<double>(t) / static_cast<double>(kPsPerS); }
inline double ticks_to_ms(Tick t) { return static_cast<double>(t) / static_cast<double>(kPsPerMs); }
inline double ticks_to_us(Tick t) { return static_cast<double>(t) / static_cast<double>(kPsPerUs); }

}  // namespace moesim
