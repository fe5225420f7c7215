// sort_values (app/run/sorted_values.hpp) must give std::sort's sequence bit for bit: the serving
// metrics' means are summed over the sorted samples, so any other order would change result.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "app/run/metrics.hpp"
#include "app/run/sorted_values.hpp"

namespace moesim {
namespace {

void expect_same_as_std_sort(std::vector<double> v) {
  std::vector<double> want = v;
  std::sort(want.begin(), want.end());
  sort_values(v);
  ASSERT_EQ(v.size(), want.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint64_t>(v[i]), std::bit_cast<std::uint64_t>(want[i])) << "at " << i;
}

TEST(SortValues, LatencyLikeSamplesSortAsStdSortDoes) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(3.0, 1.0);
  std::vector<double> v(200000);
  for (double& x : v) x = latency(rng);
  expect_same_as_std_sort(v);
}

TEST(SortValues, DuplicatesZerosSubnormalsAndHugeValues) {
  std::mt19937_64 rng(11);
  std::vector<double> v;
  const double pool[] = {0.0, std::numeric_limits<double>::denorm_min(), 1e-310, 13.25, 13.25, 1e300,
                         std::numeric_limits<double>::max(), 30.6147835, 0.5};
  for (int i = 0; i < 50000; ++i) v.push_back(pool[rng() % std::size(pool)]);
  expect_same_as_std_sort(v);
}

TEST(SortValues, ValuesWhoseBitsDoNotOrderFallBackToStdSort) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-5.0, 5.0);
  std::vector<double> v(10000);
  for (double& x : v) x = u(rng);
  expect_same_as_std_sort(v);  // negatives
  v.assign(10000, 1.0);
  v[17] = -0.0;
  v[18] = std::numeric_limits<double>::infinity();
  expect_same_as_std_sort(v);
}

TEST(SortValues, ShortAndEmptyVectors) {
  expect_same_as_std_sort({});
  expect_same_as_std_sort({3.0, 1.0, 2.0});
  std::vector<double> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 4096);
  expect_same_as_std_sort(v);  // the first length sorted by radix
}

// The running mean that replaces a kept vector (the layer-queue mode's millions of all-to-all
// messages) must give mean_of's bits over the same values in the same order.
TEST(RunningMean, SameBitsAsTheMeanOfTheKeptValues) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> ms(-4.0, 1.5);
  std::vector<double> kept;
  RunningMean running;
  EXPECT_EQ(running.mean(), mean_of(kept));
  for (int i = 0; i < 100000; ++i) {
    kept.push_back(ms(rng));
    running.add(kept.back());
    if (i % 9973 == 0) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(running.mean()), std::bit_cast<std::uint64_t>(mean_of(kept)));
    }
  }
  EXPECT_EQ(std::bit_cast<std::uint64_t>(running.mean()), std::bit_cast<std::uint64_t>(mean_of(kept)));
}

}  // namespace
}  // namespace moesim
