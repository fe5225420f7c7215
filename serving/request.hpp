#pragma once
// A request's life inside the serving engine: where it waits, how much of it is computed, and
// when each of its tokens came out. The scheduler moves it between states; the engine marks the
// steps of its life cycle (arrive, scheduled, tokens, hand over, finish) through the methods
// below, which check the request invariants (core/invariants.hpp) as they go; the metrics read
// the times.
#include <cstdint>
#include <vector>

#include "serving/inter_token_gaps.hpp"
#include "serving/workload.hpp"
#include "sim/tick.hpp"

namespace moesim {

enum class RequestState : std::uint8_t {
  kPending,       ///< not yet arrived
  kWaiting,       ///< in a rank's waiting queue (new, or preempted by recompute)
  kSwapped,       ///< preempted by swap: its KV cache is in host memory
  kRunning,       ///< holds KV blocks on its rank and is scheduled every step
  kTransferring,  ///< disaggregated: its KV cache is moving from the prefill pool to a decode GPU
  kFinished,
};

/// One request being served. The fields a step reads and writes for every request it serves come
/// first and fill two cache lines (the struct is aligned to one): a decode step at EP1,024 visits
/// 131,072 requests, several times, and each line a visit touches is a miss.
struct alignas(64) Request {
  // Line 0: what it asks for and how far it is.
  RequestSpec spec;
  /// Tokens whose KV is cached (prompt and generated tokens whose attention has run).
  std::int64_t computed = 0;
  /// Tokens a prefill must cover before the next token comes out: the prompt, plus every
  /// generated token after a recompute preemption (vLLM recomputes prompt + output so far).
  std::int64_t prefill_target = 0;
  std::int64_t generated = 0;  ///< output tokens produced so far
  std::int64_t emitted = 0;    ///< output tokens its last step produced (1 + accepted drafts)

  // Line 1: its state and its tokens' times.
  RequestState state = RequestState::kPending;
  /// Disaggregated: the decode pool takes it after its first token (0: colocated).
  bool prefill_only = false;
  double itl_max_ms = 0.0;    ///< the longest gap between consecutive output tokens (0 without)
  Tick first_scheduled = -1;  ///< first step that computed any of it (queueing delay ends)
  Tick first_token = -1;
  Tick last_token = -1;
  /// Gaps between consecutive output tokens, as ids into the run's InterTokenGaps (itl_ms()).
  std::vector<InterTokenGaps::Id> itl;

  // The rest: where it is served, and what the metrics read at the end.
  int pool = -1;  ///< pool serving it now (0: the only pool, or the prefill pool)
  int rank = -1;  ///< GPU of that pool whose attention (and KV cache) holds it
  int gpu = -1;   ///< the same GPU in the cluster's numbering
  std::int64_t preemptions = 0;
  std::int64_t admitted_order = 0;  ///< admission sequence on its rank (newest is preempted first)
  Tick arrived = -1;
  Tick finished = -1;

  /// Life cycle. Each step checks what must hold by then and throws InvariantBroken if not.
  void arrive(Tick now);          ///< request-once: it arrives once
  void mark_scheduled(Tick now);  ///< a step computes some of it (the first ends its queueing)
  /// Its step produced `tokens` output tokens (a speculative step's accepted drafts come out
  /// together and share the gap, kept in the run's `gaps`); `generated` already counts them.
  /// exact-output: never more than its output; request-causality: not before it was scheduled.
  void record_tokens(Tick now, std::int64_t tokens, InterTokenGaps& gaps);
  /// Disaggregated: its KV cache reached decode GPU `gpu` (rank `rank` of pool `pool`); the user
  /// sees the first token now.
  void hand_over(Tick now, int to_pool, int to_rank, int to_gpu);
  /// request-once, exact-output and request-causality, then finished.
  void finish(Tick now);

  /// Its gaps between consecutive output tokens in milliseconds, in order.
  std::vector<double> itl_ms(const InterTokenGaps& gaps) const { return gaps.values_of(itl); }
  bool prefilling() const { return computed < prefill_target; }
  bool done() const { return generated >= spec.output_tokens; }
  /// Tokens the KV cache must hold once the next step's `new_tokens` have run.
  std::int64_t kv_tokens_after(std::int64_t new_tokens) const { return computed + new_tokens; }
};
static_assert(sizeof(Request) == 3 * 64, "a request is two hot cache lines and one cold: see Request");

}  // namespace moesim
