#pragma once
// A request's life inside the serving engine: where it waits, how much of it is computed, and
// when each of its tokens came out. The scheduler moves it between states; the engine records
// the times; the metrics read them.
#include <cstdint>
#include <vector>

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

/// One request being served.
struct Request {
  RequestSpec spec;
  RequestState state = RequestState::kPending;
  int pool = -1;  ///< pool serving it now (0: the only pool, or the prefill pool)
  int rank = -1;  ///< GPU of that pool whose attention (and KV cache) holds it
  int gpu = -1;   ///< the same GPU in the cluster's numbering
  /// Tokens whose KV is cached (prompt and generated tokens whose attention has run).
  std::int64_t computed = 0;
  /// Tokens a prefill must cover before the next token comes out: the prompt, plus every
  /// generated token after a recompute preemption (vLLM recomputes prompt + output so far).
  std::int64_t prefill_target = 0;
  std::int64_t generated = 0;   ///< output tokens produced so far
  std::int64_t emitted = 0;     ///< output tokens its last step produced (1 + accepted drafts)
  std::int64_t preemptions = 0;
  std::int64_t admitted_order = 0;  ///< admission sequence on its rank (newest is preempted first)
  /// Disaggregated: the decode pool takes it after its first token (0: colocated).
  bool prefill_only = false;

  Tick arrived = -1;
  Tick first_scheduled = -1;  ///< first step that computed any of it (queueing delay ends)
  Tick first_token = -1;
  Tick last_token = -1;
  Tick finished = -1;
  std::vector<double> itl_ms;  ///< gaps between consecutive output tokens

  bool prefilling() const { return computed < prefill_target; }
  bool done() const { return generated >= spec.output_tokens; }
  /// Tokens the KV cache must hold once the next step's `new_tokens` have run.
  std::int64_t kv_tokens_after(std::int64_t new_tokens) const { return computed + new_tokens; }
};

}  // namespace moesim
