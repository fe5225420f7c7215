#pragma once
// A small, portable, seeded generator. std:: distributions are implementation-defined,
// so results would differ between standard libraries; ours are bit-exact everywhere.
#include <cstdint>

namespace moesim {

/// splitmix64 step: used to derive independent streams from (seed, stream ids).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// xoshiro256** generator with helpers for the few distributions moesim needs.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) { reseed(seed); }
  /// A stream derived from a seed and up to three stream ids (e.g. batch, layer):
  /// the draws of one (batch, layer) do not depend on the order others are simulated in.
  static Rng derive(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) {
    std::uint64_t s = seed;
    std::uint64_t mix = splitmix64(s) ^ (a * 0xd1342543de82ef95ULL);
    mix = splitmix64(mix) ^ (b * 0x9fb21c651e98df25ULL);
    mix = splitmix64(mix) ^ (c * 0xc2b2ae3d27d4eb4fULL);
    return Rng(mix);
  }
  void reseed(std::uint64_t seed) {
    std::uint64_t s = seed;
    for (auto& w : s_) w = splitmix64(s);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift with rejection).
  std::uint64_t below(std::uint64_t n) {
    std::uint64_t x = next();
    __uint128_t m = static_cast<__uint128_t>(x) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = -n % n;
      while (low < threshold) {
        x = next();
        m = static_cast<__uint128_t>(x) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace moesim
