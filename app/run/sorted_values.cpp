#include "app/run/sorted_values.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>

namespace moesim {

namespace {
// Below this, std::sort's few comparisons beat the radix passes' histograms.
constexpr std::size_t kRadixFrom = 4096;
constexpr int kDigitBits = 11;  // six passes cover 64 bits; 2,048-entry histograms stay in L1
constexpr int kPasses = (64 + kDigitBits - 1) / kDigitBits;
constexpr std::uint64_t kDigitMask = (std::uint64_t{1} << kDigitBits) - 1;
constexpr std::uint64_t kSignBit = std::uint64_t{1} << 63;
constexpr std::uint64_t kExponentBits = std::uint64_t{0x7ff} << 52;
}  // namespace

void sort_values(std::vector<double>& v) {
  const std::size_t n = v.size();
  if (n < kRadixFrom) {
    std::sort(v.begin(), v.end());
    return;
  }
  for (double x : v) {
    const auto k = std::bit_cast<std::uint64_t>(x);
    // A sign bit (negatives, -0) or an all-ones exponent (infinities, NaN): the bit order is not
    // the numeric order there, so std::sort decides.
    if ((k & kSignBit) != 0 || (k & kExponentBits) == kExponentBits) {
      std::sort(v.begin(), v.end());
      return;
    }
  }
  // The passes go back and forth between `v` (each double holding its own bits) and one buffer of
  // keys, left uninitialised: a fresh zeroed buffer was most of the cost at a million samples.
  const std::unique_ptr<std::uint64_t[]> buffer(new std::uint64_t[n]);
  bool in_buffer = false;
  const auto key = [&](std::size_t i) { return in_buffer ? buffer[i] : std::bit_cast<std::uint64_t>(v[i]); };
  // Every pass is stable, so after the last one the keys are in order of all their digits.
  std::array<std::size_t, std::size_t{1} << kDigitBits> count{};
  for (int pass = 0; pass < kPasses; ++pass) {
    const int shift = pass * kDigitBits;
    count.fill(0);
    for (std::size_t i = 0; i < n; ++i) ++count[(key(i) >> shift) & kDigitMask];
    // A digit every key shares moves nothing (the high exponent bits of similar latencies).
    if (std::find(count.begin(), count.end(), n) != count.end()) continue;
    std::size_t at = 0;
    for (std::size_t& c : count) {
      const std::size_t here = c;
      c = at;
      at += here;
    }
    if (in_buffer) {
      for (std::size_t i = 0; i < n; ++i) v[count[(buffer[i] >> shift) & kDigitMask]++] = std::bit_cast<double>(buffer[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const auto k = std::bit_cast<std::uint64_t>(v[i]);
        buffer[count[(k >> shift) & kDigitMask]++] = k;
      }
    }
    in_buffer = !in_buffer;
  }
  if (in_buffer)
    for (std::size_t i = 0; i < n; ++i) v[i] = std::bit_cast<double>(buffer[i]);
}

}  // namespace moesim
