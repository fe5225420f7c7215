// Count-level routing (issue 13): selections per (source GPU, expert) drawn directly, without
// drawing every token. See count_sample in models/routing.hpp for why its marginals are those of
// systematic_sample's token draws.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>

#include "models/routing.hpp"

namespace moesim {

namespace {

/// A standard normal draw (Box–Muller; one of the pair is discarded so draws stay independent
/// of call order).
double normal01(Rng& rng) {
  const double u1 = 1.0 - rng.uniform01();  // (0, 1]
  const double u2 = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// q^n by repeated squaring. Squaring doubles a relative error, so the result is within about
/// 2n·2^-53 of the exact power: 2^-36 for the n < 2^16 binomial_inversion uses it for.
double power_bound(double q, std::int64_t n) {
  double result = 1.0;
  double base = q;
  for (auto e = static_cast<std::uint64_t>(n); e > 0; e >>= 1) {
    if (e & 1U) result *= base;
    base *= base;
  }
  return result;
}

/// Exact Binomial(n, p) by inversion of the CDF at `u` (uniform in [0, 1)), p <= 0.5; O(n·p)
/// expected.
std::int64_t binomial_inversion(std::int64_t n, double p, double u) {
  const double q = 1.0 - p;
  // Most draws of count_sample's chains are 0 (u <= q^n), and few go past a handful of terms.
  // For n < 2^16 two cheaper paths decide the draw when u is clear of their error; otherwise it
  // goes on exactly as before, so the result is the one std::pow's path gives, bit for bit.
  const double ratio = p / q;
  if (n < (std::int64_t{1} << 16)) {
    // Bernoulli's inequality, q^n >= 1 - n(1 - q), with 1 - q within 2^-53 of p: the margin
    // covers n times that and the rounding of the bound.
    if (u < 1.0 - static_cast<double>(n) * p - 1e-9) return 0;
    // The inversion below from the bound instead of std::pow: each term and partial sum is then
    // within a relative 2^-35 of the exact path's (2^-36 from the start, 2^-52 per operation over
    // fewer than 1,000 terms), so a comparison clear of a 2^-30 margin goes the same way on both.
    // Any comparison too close to call, or a term near underflow, sends the draw the exact way.
    constexpr double kMargin = 0x1.0p-30;
    double prob = power_bound(q, n);
    double cdf = prob;
    std::int64_t k = 0;
    bool clear = prob > 1e-290;
    while (clear && k < n) {
      if (std::abs(u - cdf) <= cdf * kMargin) clear = false;
      if (!(u > cdf)) break;
      prob *= ratio * static_cast<double>(n - k) / static_cast<double>(k + 1);
      cdf += prob;
      ++k;
      if (prob <= 1e-290 || k >= 1000) clear = false;
    }
    if (clear) return k;
  }
  double prob = std::pow(q, static_cast<double>(n));
  double cdf = prob;
  std::int64_t k = 0;
  while (u > cdf && k < n) {
    prob *= ratio * static_cast<double>(n - k) / static_cast<double>(k + 1);
    cdf += prob;
    ++k;
    if (prob <= 0.0 && cdf < u) break;  // underflow far in the tail: stop at the mode's side
  }
  return k;
}

/// Sorts `v` (ascending), whose values lie in [0, 1]: count_sample's segment cuts. A bucket pass
/// (the value times four times the size picks one of that many buckets, filled stably in one scatter)
/// leaves each value in its bucket's range, so the insertion pass that follows moves each value
/// only past the few of its own bucket. O(n) for the near-uniform fractional parts the cuts are,
/// against the O(n log runs) of merging their top_k + 2 ascending runs, whose comparisons went
/// either way at random and stalled on each other. The result is the one std::sort gives (equal
/// values are equal doubles). `bucket`, `count` and `buf` are scratch.
void sort_unit_interval(std::vector<double>& v, std::vector<std::uint32_t>& bucket, std::vector<std::uint32_t>& count,
                        std::vector<double>& buf) {
  const std::size_t n = v.size();
  const std::size_t buckets = 4 * n;  // few values share one, so the insertion pass rarely moves any
  bucket.resize(n);
  count.assign(buckets + 1, 0);
  const double scale = static_cast<double>(buckets);
  for (std::size_t i = 0; i < n; ++i) {
    const double b = std::clamp(v[i] * scale, 0.0, scale - 1.0);
    bucket[i] = static_cast<std::uint32_t>(b);
    ++count[bucket[i] + 1];
  }
  for (std::size_t b = 1; b <= buckets; ++b) count[b] += count[b - 1];
  buf.resize(n);
  for (std::size_t i = 0; i < n; ++i) buf[count[bucket[i]]++] = v[i];
  for (std::size_t i = 1; i < n; ++i) {
    const double x = buf[i];
    std::size_t j = i;
    for (; j > 0 && x < buf[j - 1]; --j) buf[j] = buf[j - 1];
    buf[j] = x;
  }
  v.swap(buf);
}

}  // namespace

std::int64_t binomial_draw(std::int64_t n, double p, Rng& rng) {
  if (n <= 0 || p <= 0.0) return 0;
  if (p >= 1.0) return n;
  if (p > 0.5) return n - binomial_draw(n, 1.0 - p, rng);
  const double mean = static_cast<double>(n) * p;
  if (mean < 20.0) return binomial_inversion(n, p, rng.uniform01());
  const double sd = std::sqrt(mean * (1.0 - p));
  const double x = std::floor(mean + sd * normal01(rng) + 0.5);
  return static_cast<std::int64_t>(std::clamp(x, 0.0, static_cast<double>(n)));
}

LayerRouting count_sample(const std::vector<double>& pi, int top_k, const std::vector<std::int64_t>& tokens, Rng& rng) {
  const int n = static_cast<int>(pi.size());
  if (top_k < 1 || top_k > n) throw std::invalid_argument("count_sample: bad top_k");
  LayerRouting r;
  r.top_k = top_k;
  r.num_experts = n;
  r.by_count = true;
  r.sources = static_cast<int>(tokens.size());
  r.counts.assign(tokens.size() * static_cast<std::size_t>(n), 0);
  r.num_tokens = std::accumulate(tokens.begin(), tokens.end(), std::int64_t{0});

  // Scratch reused across calls (a serving run samples every layer of every step).
  thread_local std::vector<std::int32_t> order;
  thread_local std::vector<double> cum, cuts, sorted;
  thread_local std::vector<std::size_t> above;
  thread_local std::vector<std::uint32_t> bucket, bucket_count;
  order.resize(static_cast<std::size_t>(n));
  cum.assign(static_cast<std::size_t>(n) + 1, 0.0);
  for (std::size_t g = 0; g < tokens.size(); ++g) {
    if (tokens[g] <= 0) continue;
    // A fresh expert order per source, as systematic_sample reshuffles per block of tokens.
    std::iota(order.begin(), order.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(order[static_cast<std::size_t>(i)], order[rng.below(static_cast<std::uint64_t>(i) + 1)]);
    for (int j = 0; j < n; ++j) cum[static_cast<std::size_t>(j) + 1] = cum[static_cast<std::size_t>(j)] + pi[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
    const double total = cum[static_cast<std::size_t>(n)];
    if (!(total > 0.0)) throw std::invalid_argument("count_sample: all inclusion probabilities are zero");
    for (double& c : cum) c *= static_cast<double>(top_k) / total;
    cum[static_cast<std::size_t>(n)] = static_cast<double>(top_k);
    // Segments of u in [0, 1) between the fractional parts of the interior cumulative sums.
    cuts.assign(1, 0.0);
    for (int j = 1; j < n; ++j) {
      const double f = cum[static_cast<std::size_t>(j)] - std::floor(cum[static_cast<std::size_t>(j)]);
      if (f > 0.0 && f < 1.0) cuts.push_back(f);
    }
    cuts.push_back(1.0);
    sort_unit_interval(cuts, bucket, bucket_count, sorted);
    // Tokens per segment: a multinomial drawn as a chain of binomials.
    std::int64_t left = tokens[g];
    double mass_left = 1.0;
    std::int64_t* row = &r.counts[g * static_cast<std::size_t>(n)];
    // above[s]: the first cum index past the last segment's mid + s. Segments come in increasing
    // order, so each search resumes where the previous one stopped (the same index a binary
    // search from the start would find, in O(n + k) per source rather than O(k log n) per segment).
    // Pointer s starts at the first cum index past s: every x = mid + s is at least s, so the
    // walk would pass the earlier ones anyway (and the pointers together cross cum once).
    above.assign(static_cast<std::size_t>(top_k), 1);
    for (std::size_t s = 0, p = 1; s < static_cast<std::size_t>(top_k); ++s) {
      while (p <= static_cast<std::size_t>(n) && !(static_cast<double>(s) < cum[p])) ++p;
      above[s] = p;
    }
    for (std::size_t i = 0; i + 1 < cuts.size() && left > 0; ++i) {
      const double len = cuts[i + 1] - cuts[i];
      if (len <= 0.0) continue;
      const bool last = i + 2 == cuts.size();
      const std::int64_t m = last ? left : binomial_draw(left, std::min(1.0, len / mass_left), rng);
      mass_left -= len;
      left -= m;
      if (m == 0) continue;
      // The segment's subset: the interval holding mid + s for s = 0..k-1 (as systematic_sample).
      const double mid = 0.5 * (cuts[i] + cuts[i + 1]);
      for (int s = 0; s < top_k; ++s) {
        const double x = mid + s;
        std::size_t& p = above[static_cast<std::size_t>(s)];
        while (p <= static_cast<std::size_t>(n) && !(x < cum[p])) ++p;
        row[order[std::min<std::size_t>(p - 1, static_cast<std::size_t>(n) - 1)]] += m;
      }
    }
  }
  return r;
}

LayerRouting RoutingModel::route_counts(int batch, int moe_layer, const std::vector<std::int64_t>& tokens, Rng& rng) const {
  return count_sample(inclusion_probabilities(distribution(batch, moe_layer, rng), ctx_.top_k), ctx_.top_k, tokens, rng);
}

}  // namespace moesim
