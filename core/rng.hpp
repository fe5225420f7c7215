#pragma once
// A small, portable, seeded generator. std:: distributions are implementation-defined,
// so results would differ between standard libraries; ours are bit-exact everywhere.
#include <cstdint>
#include <type_traits>

#include "core/rng_streams.hpp"

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
  /// The generator of one draw: a seed, a stream of the table (core/rng_streams.hpp) and up to
  /// four ids (e.g. pool, step, layer). The draws of one (stream, ids) do not depend on the order
  /// others are simulated in, and two draws share numbers only if seed, stream and ids all agree.
  template <class... Ids>
  static Rng derive(std::uint64_t seed, Stream stream, Ids... ids) {
    return Rng(derive_seed(seed, stream, ids...));
  }
  /// The seed Rng::derive starts from, for code that hands a seed on (e.g. one per restart).
  template <class... Ids>
  static std::uint64_t derive_seed(std::uint64_t seed, Stream stream, Ids... ids) {
    static_assert(sizeof...(Ids) <= 4, "a draw is named by at most four ids");
    static_assert((std::is_integral_v<Ids> && ...), "stream ids are integers");
    // A chain of bijective mixes, with the number of ids folded in first, so (s, a) and (s, a, 0)
    // are different draws.
    std::uint64_t h = mix64(seed ^ (static_cast<std::uint64_t>(sizeof...(Ids)) << 56));
    h = mix64(h ^ stream_id(stream));
    ((h = mix64(h ^ static_cast<std::uint64_t>(ids))), ...);
    return h;
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
  /// splitmix64's finalizer: a bijection of 64-bit words that mixes every bit into every bit.
  static constexpr std::uint64_t mix64(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace moesim
