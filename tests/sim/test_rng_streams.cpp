// The random-stream table (core/rng_streams.hpp, issue 30 class 5): every stream's id distinct
// and far from the small integers passed as ids; a draw named by (seed, stream, ids) differs when
// any of the three differs, the number of ids included; and the serving engine's per-pool streams
// (routing, predictor, second micro-batch) never share a generator between pools, the defect
// that made the decode pool's routing the prefill pool's predictor draws.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <tuple>

#include "core/rng.hpp"
#include "core/rng_streams.hpp"

namespace moesim {

TEST(RngStreams, IdsAreDistinctAndNotSmallIntegers) {
  std::set<std::uint64_t> ids;
  for (const Stream s : all_streams()) {
    EXPECT_TRUE(ids.insert(stream_id(s)).second) << "stream " << static_cast<int>(s) << " repeats an id";
    EXPECT_GE(stream_id(s), std::uint64_t{1} << 32) << "stream " << static_cast<int>(s);
  }
  EXPECT_EQ(ids.size(), kStreamCount);
}

TEST(RngStreams, ADrawIsNamedBySeedStreamAndIds) {
  const std::uint64_t base = Rng::derive(1, Stream::kStepRouting, 0, 5, 3).next();
  EXPECT_EQ(base, Rng::derive(1, Stream::kStepRouting, 0, 5, 3).next());
  EXPECT_NE(base, Rng::derive(2, Stream::kStepRouting, 0, 5, 3).next());     // seed
  EXPECT_NE(base, Rng::derive(1, Stream::kStepPredictor, 0, 5, 3).next());   // stream
  EXPECT_NE(base, Rng::derive(1, Stream::kStepRouting, 1, 5, 3).next());     // an id
  EXPECT_NE(base, Rng::derive(1, Stream::kStepRouting, 0, 5, 3, 0).next());  // one id more
  EXPECT_NE(Rng::derive(1, Stream::kHotSet).next(), Rng::derive(1, Stream::kHotSet, 0).next());
  // Signed ids: -1 and 2^64 - 1 name the same draw (ids are taken modulo 2^64), -1 and 1 do not.
  EXPECT_EQ(Rng::derive(1, Stream::kProfileRouting, -1).next(),
            Rng::derive(1, Stream::kProfileRouting, ~std::uint64_t{0}).next());
  EXPECT_NE(Rng::derive(1, Stream::kProfileRouting, -1).next(), Rng::derive(1, Stream::kProfileRouting, 1).next());
}

TEST(RngStreams, EveryStreamDrawsApartFromEveryOther) {
  // Same seed and ids in every stream: all first draws distinct.
  std::set<std::uint64_t> first;
  for (const Stream s : all_streams()) first.insert(Rng::derive(7, s, 0, 1).next());
  EXPECT_EQ(first.size(), kStreamCount);
}

TEST(RngStreams, ThePoolsOfADisaggregatedRunNeverShareAGenerator) {
  // The engine names a step's draws (stream, pool, step, layer). Before the table it added the pool
  // to the stream, so (routing, decode pool) was (predictor, prefill pool). Every combination of
  // the per-pool streams, both pools, 64 steps and 8 layers is a different generator.
  std::set<std::uint64_t> seeds;
  std::size_t named = 0;
  for (const Stream s : {Stream::kStepRouting, Stream::kStepPredictor, Stream::kSecondMicroBatchRouting})
    for (int pool = 0; pool < 2; ++pool)
      for (int step = 0; step < 64; ++step)
        for (int layer = 0; layer < 8; ++layer, ++named) seeds.insert(Rng::derive_seed(11, s, pool, step, layer));
  EXPECT_EQ(seeds.size(), named);
  EXPECT_NE(Rng::derive(11, Stream::kStepRouting, 1, 4, 2).next(), Rng::derive(11, Stream::kStepPredictor, 0, 4, 2).next());
}

}  // namespace moesim
