#pragma once
// vLLM-style continuous batching for one attention data-parallel rank (one GPU's requests and
// KV cache). Each call to schedule() forms the rank's share of the next step: running requests
// first (decode tokens, then the rest of chunked prompts), then waiting requests admitted in
// order while the token budget, the sequence limit and the KV blocks allow. When a running
// request needs a block and none is free, the newest running request is preempted (recompute:
// its KV is dropped and it is prefilled again; swap: its KV goes to host memory over PCIe).
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "serving/config.hpp"
#include "serving/kv_cache.hpp"
#include "serving/request.hpp"

namespace moesim {

/// One sequence's part of a step, as the scheduler decided it.
struct ScheduledChunk {
  Request* request = nullptr;
  std::int64_t new_tokens = 0;
  std::int64_t context = 0;  ///< tokens already cached before this step
  /// A chunk of a prompt: its request was prefilling when scheduled, as it stays until the step
  /// completes. Kept here so that the engine's passes over a step need not visit the request.
  bool prefill = false;
};

/// A rank's share of one step.
struct RankStep {
  std::vector<ScheduledChunk> chunks;
  std::int64_t swap_out_tokens = 0;  ///< KV tokens moved to host before the step (swap preemption)
  std::int64_t swap_in_tokens = 0;   ///< KV tokens moved back from host before the step
  std::int64_t preemptions = 0;
  std::int64_t new_tokens() const;
};

/// The continuous-batching scheduler of one rank.
class RankScheduler {
 public:
  RankScheduler(const SchedulerConfig& config, PagedKvCache cache);

  /// Queues a request at the back of the waiting queue (an arrival, or a decode handed over by
  /// the prefill pool whose KV blocks are already held here).
  void enqueue(Request* r);
  /// Forms this rank's part of the next step (may be empty) and updates states and KV blocks.
  RankStep schedule(Tick now);
  /// How many of a decode chunk's `drafts` speculative tokens its request accepts (0..drafts).
  using AcceptDrafts = std::function<std::int64_t(const Request&, std::int64_t drafts)>;
  /// Applies a finished step: advances every scheduled request. Returns the requests that
  /// produced tokens in it (Request::emitted of them; the engine records times and retires
  /// finished ones). `accept` decides speculative decode chunks (none: no draft accepted).
  std::vector<Request*> complete(const RankStep& step, const AcceptDrafts& accept = {});
  /// Removes a finished (or handed-over) request and frees its blocks.
  void retire(Request* r);
  /// Whether this rank may reserve the KV blocks of `r`, prefilled in a prefill pool, before its
  /// transfer starts: room for its KV and its first decode token, and no preempted request
  /// waiting at the front of the queue for blocks to free up.
  bool takes_handover(const Request& r) const;

  /// Requests this rank holds (waiting, swapped or running).
  std::size_t outstanding() const { return waiting_.size() + running_.size(); }
  std::size_t running() const { return running_.size(); }
  bool has_work() const { return outstanding() > 0; }
  PagedKvCache& cache() { return cache_; }
  const PagedKvCache& cache() const { return cache_; }

 private:
  /// Query tokens of `r`'s next decode step: 1, or 1 + its drafts under speculative decoding.
  std::int64_t decode_tokens(const Request& r) const;
  /// Frees blocks by preempting the newest running request (other than those in `keep`).
  /// Returns the victim, or nullptr when none could be preempted.
  Request* preempt_newest(RankStep& step, const Request* self);
  /// Frees `victim`'s blocks: swapped out, or dropped to be prefilled again (the caller queues it).
  void preempt(RankStep& step, Request* victim);
  /// With nothing running, frees blocks for the waiting `head` by preempting the newest other
  /// waiting request that holds blocks (a decode handed over with its KV). False when none does.
  bool preempt_waiting_holder(RankStep& step, const Request* head);
  /// `prefills_only`: only running requests still prefilling (a prefill-first step).
  void schedule_running(RankStep& step, std::int64_t& budget, bool prefills_only = false);
  void admit_waiting(RankStep& step, std::int64_t& budget, Tick now);

  SchedulerConfig config_;
  PagedKvCache cache_;
  std::deque<Request*> waiting_;   ///< FIFO; preempted requests go back to the front
  std::vector<Request*> running_;  ///< in admission order
  std::int64_t admissions_ = 0;
};

}  // namespace moesim
