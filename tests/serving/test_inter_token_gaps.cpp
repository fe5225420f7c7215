// InterTokenGaps (serving/inter_token_gaps.hpp) keeps each distinct inter-token gap once; the
// ITL summary read off its counts must be the summary of the gaps themselves, bit for bit, or
// result.json would change with the representation.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "app/run/metrics.hpp"
#include "serving/inter_token_gaps.hpp"
#include "serving/request.hpp"

namespace moesim {
namespace {

TEST(InterTokenGaps, EqualGapsShareAnIdInFirstSeenOrder) {
  InterTokenGaps gaps;
  EXPECT_EQ(gaps.intern(12.5), 0u);
  EXPECT_EQ(gaps.intern(12.5), 0u);  // the last gap again
  EXPECT_EQ(gaps.intern(0.0), 1u);
  EXPECT_EQ(gaps.intern(7.25), 2u);
  EXPECT_EQ(gaps.intern(12.5), 0u);  // an older gap, found by value
  EXPECT_EQ(gaps.distinct(), 3u);
  EXPECT_EQ(gaps.values_of({2, 0, 1, 0}), (std::vector<double>{7.25, 12.5, 0.0, 12.5}));
  const auto counted = gaps.ascending({4, 0, 2});
  ASSERT_EQ(counted.size(), 2u);  // 0.0 counted 0 times is left out
  EXPECT_EQ(counted[0], (std::pair<double, std::uint64_t>{7.25, 2}));
  EXPECT_EQ(counted[1], (std::pair<double, std::uint64_t>{12.5, 4}));
}

// Summarises `sample` both ways and compares every figure's bits.
void expect_same_summary(const std::vector<double>& sample) {
  InterTokenGaps gaps;
  std::vector<std::uint64_t> counts;
  for (const double v : sample) {
    const InterTokenGaps::Id id = gaps.intern(v);
    if (id >= counts.size()) counts.resize(id + 1, 0);
    ++counts[id];
  }
  for (const bool p90 : {false, true}) {
    const nlohmann::json want = distribution_summary(sample, p90);
    const nlohmann::json got = distribution_summary(gaps.ascending(counts), p90);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [key, value] : want.items())
      EXPECT_EQ(std::bit_cast<std::uint64_t>(got[key].get<double>()), std::bit_cast<std::uint64_t>(value.get<double>()))
          << key << " of " << sample.size() << " values: " << got[key] << " against " << value;
  }
}

TEST(InterTokenGaps, CountedSummaryIsTheSampleSummaryBitForBit) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> step_ms(3.0, 0.7);
  std::vector<double> pool(300);
  for (double& v : pool) v = step_ms(rng);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{99}, std::size_t{100000}}) {
    std::vector<double> sample;
    for (std::size_t i = 0; i < n; ++i) sample.push_back(pool[rng() % pool.size()]);
    expect_same_summary(sample);
  }
  // Every gap distinct: the table holds them all.
  std::vector<double> distinct(5000);
  for (double& v : distinct) v = step_ms(rng);
  expect_same_summary(distinct);
}

TEST(InterTokenGaps, ASpeculativeStepsTokensShareItsGap) {
  InterTokenGaps gaps;
  Request r;
  r.spec.output_tokens = 5;
  r.arrive(0);
  r.mark_scheduled(0);
  r.generated = 1;
  r.record_tokens(Tick{10'000'000'000}, 1, gaps);  // 10 ms: the first token, no gap
  r.generated = 4;
  r.record_tokens(Tick{16'000'000'000}, 3, gaps);  // three tokens in 6 ms
  r.generated = 5;
  r.record_tokens(Tick{19'000'000'000}, 1, gaps);
  EXPECT_EQ(r.itl_ms(gaps), (std::vector<double>{2.0, 2.0, 2.0, 3.0}));
  EXPECT_EQ(r.itl_max_ms, 3.0);
  EXPECT_EQ(gaps.distinct(), 2u);
}

}  // namespace
}  // namespace moesim
