// RankLoadIndex answers what the router's scan over every rank answered: the least loaded rank,
// the lowest index among equals, after any sequence of load changes.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <vector>

#include "serving/rank_load_index.hpp"

namespace moesim {
namespace {

int scan(const std::vector<std::size_t>& load) {
  int best = 0;
  for (int g = 1; g < static_cast<int>(load.size()); ++g)
    if (load[static_cast<std::size_t>(g)] < load[static_cast<std::size_t>(best)]) best = g;
  return best;
}

TEST(RankLoadIndex, EmptyAndSingleRank) {
  RankLoadIndex none(0);
  EXPECT_EQ(none.least_loaded(), 0);
  RankLoadIndex one(1);
  EXPECT_EQ(one.least_loaded(), 0);
  one.set(0, 7);
  EXPECT_EQ(one.least_loaded(), 0);
  EXPECT_EQ(one.load(0), 7u);
}

TEST(RankLoadIndex, TiesGoToTheLowestRank) {
  RankLoadIndex idx(5);  // not a power of two: padding leaves must never win
  EXPECT_EQ(idx.least_loaded(), 0);
  idx.set(0, 1);
  EXPECT_EQ(idx.least_loaded(), 1);
  idx.set(1, 1);
  idx.set(2, 1);
  idx.set(3, 1);
  EXPECT_EQ(idx.least_loaded(), 4);
  idx.set(4, 1);
  EXPECT_EQ(idx.least_loaded(), 0);
  idx.set(3, 0);
  EXPECT_EQ(idx.least_loaded(), 3);
}

// Random enqueue/retire sequences over several pool sizes, checked against the scan each time.
TEST(RankLoadIndex, MatchesTheScanUnderRandomChanges) {
  std::mt19937_64 rng(7);
  for (std::size_t ranks : {2u, 3u, 8u, 72u, 1000u}) {
    RankLoadIndex idx(ranks);
    std::vector<std::size_t> load(ranks, 0);
    for (int step = 0; step < 20000; ++step) {
      const bool arrive = rng() % 3 != 0;
      if (arrive) {
        const auto r = static_cast<std::size_t>(idx.least_loaded());
        idx.set(r, ++load[r]);
      } else {
        const auto r = static_cast<std::size_t>(rng() % ranks);
        if (load[r] > 0) idx.set(r, --load[r]);
      }
      ASSERT_EQ(idx.least_loaded(), scan(load)) << ranks << " ranks, step " << step;
    }
  }
}

}  // namespace
}  // namespace moesim
