#pragma once
// Every random stream moesim draws from, in one table (issue 30, class 5).
//
// A draw is named by (seed, stream, ids...): Rng::derive hashes the three together, so two draws
// share numbers only if all three agree. Before this table the streams were hand-typed constants
// in nine files, and two of them collided: the engine added the pool index to its routing
// stream, so the decode pool's routing and the prefill pool's predictor drew the same numbers.
// Here a stream's id is derived from its position in the enum, never typed, and ids that vary
// (pool, step, layer, request) are ids, never added to the stream.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace moesim {

/// One independent random stream (the comment names its ids, in the order they are passed).
enum class Stream : std::uint8_t {
  kBatchRouting,               ///< a simulated batch's routing: (batch, moe layer)
  kBatchPredictor,             ///< a predictor's own draws for a simulated batch: (batch, moe layer)
  kProfileRouting,             ///< the policies' profiling window: (profile batch, moe layer)
  kTrainingRouting,            ///< the predictors' offline training window: (training batch, moe layer)
  kHotSet,                     ///< the hot-set routing model's hot experts: (which draw)
  kFluctuation,                ///< the fluctuating routing model's per-batch skew: (batch)
  kBatchTokenIds,              ///< token ids of a prefill batch: (batch)
  kIdPreference,               ///< token-conditioned routing's per-id preferences: (moe layer)
  kPositionPreference,         ///< token-conditioned routing's per-position preferences: (moe layer)
  kRequestTokenIds,            ///< a serving request's token ids: (request, position)
  kCoactivationBatchTokens,    ///< co-activation routing, a batch token's identity: (batch, token)
  kCoactivationRequestTokens,  ///< co-activation routing, a request token's identity: (request, position)
  kCoactivationLayer,          ///< co-activation routing, one token's choice in a layer (seeded by the token)
  kCoactivationLayout,         ///< co-activation routing's expert clusters: (moe layer)
  kGraceGrouping,              ///< GRACE-MoE's k-means restarts (§3.2): (restart) and (node)
  kGraceRouting,               ///< GRACE-MoE's replica choice per token (§3.3): (batch, moe layer)
  kArrivalGaps,                ///< serving arrival gaps: one stream per run
  kRequestLengths,             ///< serving prompt and output lengths: (request, which length)
  kAmoeRouting,                ///< AMoE's engine routing: (attention run, moe layer)
  kStepRouting,                ///< a serving step's routing: (pool, step, moe layer)
  kStepPredictor,              ///< a predictor's draws in a serving step: (pool, step, moe layer)
  kDraftAcceptance,            ///< speculative decoding's acceptance: (request, generated tokens)
  kSecondMicroBatchRouting,    ///< two-batch overlap, the second micro-batch: (pool, step, moe layer)
  kCount                       ///< not a stream: the number of streams
};

inline constexpr std::size_t kStreamCount = static_cast<std::size_t>(Stream::kCount);

/// The 64-bit id a stream is hashed with: a bijective mix of its position (splitmix64's
/// finalizer), so distinct streams have distinct ids, far from the small integers passed as ids.
constexpr std::uint64_t stream_id(Stream s) {
  std::uint64_t z = 0x5354'5245'414D'0000ULL + static_cast<std::uint64_t>(s);  // "STREAM" + index
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Every stream, for tests that check the table (distinct ids, independent draws).
constexpr std::array<Stream, kStreamCount> all_streams() {
  std::array<Stream, kStreamCount> out{};
  for (std::size_t i = 0; i < kStreamCount; ++i) out[i] = static_cast<Stream>(i);
  return out;
}

}  // namespace moesim
