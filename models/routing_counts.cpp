// Count-level routing (issue 13): selections per (source GPU, expert) drawn directly, without
// drawing every token. See count_sample in models/routing.hpp for why its marginals are those of
// systematic_sample's token draws.
#include <algorithm>
#include <cmath>
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

/// Exact Binomial(n, p) by inversion of the CDF, p <= 0.5; O(n·p) expected.
std::int64_t binomial_inversion(std::int64_t n, double p, Rng& rng) {
  const double q = 1.0 - p;
  const double ratio = p / q;
  double prob = std::pow(q, static_cast<double>(n));
  double cdf = prob;
  const double u = rng.uniform01();
  std::int64_t k = 0;
  while (u > cdf && k < n) {
    prob *= ratio * static_cast<double>(n - k) / static_cast<double>(k + 1);
    cdf += prob;
    ++k;
    if (prob <= 0.0 && cdf < u) break;  // underflow far in the tail: stop at the mode's side
  }
  return k;
}

/// Sorts `v` (ascending), which is a few ascending runs: the fractional parts of a non-decreasing
/// cumulative sum rise between the integers it crosses, so the cuts of count_sample are at most
/// top_k + 2 runs. Merging them gives the same sequence as a full sort (equal values are equal
/// doubles), in O(n log runs). `runs` and `buf` are scratch.
void sort_runs(std::vector<double>& v, std::vector<std::size_t>& runs, std::vector<double>& buf) {
  runs.assign(1, 0);
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] < v[i - 1]) runs.push_back(i);
  if (runs.size() > 32) {  // not the expected shape: no gain from merging
    std::sort(v.begin(), v.end());
    return;
  }
  runs.push_back(v.size());
  buf.resize(v.size());
  // Pairwise passes, ping-ponging between v and buf.
  std::vector<double>* from = &v;
  std::vector<double>* to = &buf;
  while (runs.size() > 2) {
    std::size_t w = 0;
    std::size_t k = 0;
    for (; k + 2 < runs.size(); k += 2) {
      std::merge(from->begin() + static_cast<std::ptrdiff_t>(runs[k]), from->begin() + static_cast<std::ptrdiff_t>(runs[k + 1]),
                 from->begin() + static_cast<std::ptrdiff_t>(runs[k + 1]), from->begin() + static_cast<std::ptrdiff_t>(runs[k + 2]),
                 to->begin() + static_cast<std::ptrdiff_t>(runs[k]));
      runs[w++] = runs[k];
    }
    if (k + 1 < runs.size()) {  // an odd run out: copied over as it is
      std::copy(from->begin() + static_cast<std::ptrdiff_t>(runs[k]), from->begin() + static_cast<std::ptrdiff_t>(runs[k + 1]),
                to->begin() + static_cast<std::ptrdiff_t>(runs[k]));
      runs[w++] = runs[k];
    }
    runs[w++] = runs.back();
    runs.resize(w);
    std::swap(from, to);
  }
  if (from != &v) v.swap(buf);
}

}  // namespace

std::int64_t binomial_draw(std::int64_t n, double p, Rng& rng) {
  if (n <= 0 || p <= 0.0) return 0;
  if (p >= 1.0) return n;
  if (p > 0.5) return n - binomial_draw(n, 1.0 - p, rng);
  const double mean = static_cast<double>(n) * p;
  if (mean < 20.0) return binomial_inversion(n, p, rng);
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
  thread_local std::vector<double> cum, cuts, merged;
  thread_local std::vector<std::size_t> above, runs;
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
    sort_runs(cuts, runs, merged);
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
