#include "serving/scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace moesim {

std::int64_t RankStep::new_tokens() const {
  std::int64_t n = 0;
  for (const auto& c : chunks) n += c.new_tokens;
  return n;
}

RankScheduler::RankScheduler(const SchedulerConfig& config, PagedKvCache cache)
    : config_(config), cache_(std::move(cache)) {}

void RankScheduler::enqueue(Request* r) {
  if (r->state != RequestState::kSwapped) r->state = RequestState::kWaiting;
  waiting_.push_back(r);
}

RankStep RankScheduler::schedule(Tick now) {
  RankStep step;
  // Every running request and one admission at least: one allocation, not a doubling series.
  step.chunks.reserve(running_.size() + 1);
  std::int64_t budget = config_.max_batched_tokens;
  if (config_.step_mix == StepMix::kPrefillFirst) {
    // A prefill step when there is prefill to run (the chunked prompt first, then new prompts);
    // otherwise a decode step of every running request.
    schedule_running(step, budget, true);
    admit_waiting(step, budget, now);
    if (!step.chunks.empty()) return step;
    schedule_running(step, budget);
    return step;
  }
  schedule_running(step, budget);
  admit_waiting(step, budget, now);
  return step;
}

namespace {
/// Tokens of prefill a request may run this step: the rest of its prompt, cut to the budget when
/// chunked prefill is on, and nothing when it is off and the rest does not fit (vLLM without
/// chunking schedules whole prompts only).
std::int64_t prefill_chunk(const Request& r, std::int64_t budget, bool chunked) {
  const std::int64_t rest = r.prefill_target - r.computed;
  if (chunked) return std::min(rest, budget);
  return rest <= budget ? rest : 0;
}
}  // namespace

// Running requests keep their place: decodes and the rest of chunked prompts, in admission order
// (vLLM V1 schedules running requests before waiting ones). A request that needs a block when
// none is free preempts the newest running request, itself if it is the newest.
void RankScheduler::schedule_running(RankStep& step, std::int64_t& budget, bool prefills_only) {
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    if (r->state != RequestState::kRunning || (prefills_only && !r->prefilling())) {
      // Handed over to the decode pool (KV in flight), or a decode in a prefill-only step.
      ++i;
      continue;
    }
    const std::int64_t n = r->prefilling() ? prefill_chunk(*r, budget, config_.chunked_prefill) : decode_tokens(*r);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool self_preempted = false;
    // grow() changes nothing when the blocks do not suffice: make room and try again.
    while (!cache_.grow(r->spec.id, r->computed + n)) {
      const Request* victim = preempt_newest(step, r);
      if (victim == r) {
        self_preempted = true;
        break;
      }
      if (!victim) throw std::logic_error("KV cache: a lone request does not fit (validation should have caught it)");
    }
    if (self_preempted) continue;  // running_[i] is now the next request
    step.chunks.push_back({r, n, r->computed, r->prefilling()});
    budget -= n;
    ++i;
  }
}

// Waiting requests in order (preempted ones first), while the sequence limit, the budget and the
// free blocks allow (blocks for the next chunk, or for the whole request under reserve-full
// admission); the first that does not fit stops admission (FCFS, as vLLM and TensorRT-LLM).
void RankScheduler::admit_waiting(RankStep& step, std::int64_t& budget, Tick now) {
  while (!waiting_.empty() && budget > 0 && static_cast<std::int64_t>(running_.size()) < config_.max_num_seqs) {
    Request* r = waiting_.front();
    const bool swapped = r->state == RequestState::kSwapped;
    const std::int64_t n = r->prefilling() ? prefill_chunk(*r, budget, config_.chunked_prefill) : decode_tokens(*r);
    // Reserve-full admission (TensorRT-LLM's GUARANTEED_NO_EVICT) takes the blocks of the whole
    // request now, so the request never needs another block and nothing is ever preempted.
    const std::int64_t hold = config_.admission == Admission::kReserveFull
                                  ? std::max(r->computed + n, r->spec.prompt_tokens + r->spec.output_tokens)
                                  : r->computed + n;
    if (n <= 0) break;
    if (!cache_.grow(r->spec.id, hold)) {
      // Nothing running here means no step will free a block; if requests queued behind hold
      // blocks (decodes handed over with their KV), the queue would wait for ever, so the newest
      // of them is preempted as vLLM preempts the newest request holding blocks.
      if (running_.empty() && preempt_waiting_holder(step, r)) continue;
      break;
    }
    if (swapped) step.swap_in_tokens += r->computed;
    waiting_.pop_front();
    r->state = RequestState::kRunning;
    r->admitted_order = admissions_++;
    r->mark_scheduled(now);
    running_.push_back(r);
    step.chunks.push_back({r, n, r->computed, r->prefilling()});
    budget -= n;
  }
}

Request* RankScheduler::preempt_newest(RankStep& step, const Request* self) {
  // The newest running request that is not in flight to another pool.
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Request* victim = *it;
    if (victim->state != RequestState::kRunning) continue;
    if (victim != self && std::any_of(step.chunks.begin(), step.chunks.end(),
                                      [&](const ScheduledChunk& c) { return c.request == victim; }))
      return nullptr;  // everything newer is already in this step: nothing left to take
    running_.erase(std::next(it).base());
    preempt(step, victim);
    waiting_.push_front(victim);
    return victim;
  }
  return nullptr;
}

void RankScheduler::preempt(RankStep& step, Request* victim) {
  ++victim->preemptions;
  ++step.preemptions;
  // Swap keeps a decoding request's KV in host memory; a request still prefilling is recomputed
  // (vLLM swaps only sequences past their prompt). Recomputed, a decode handed over by a prefill
  // pool is prefilled again here, prompt and output so far: the prefill GPU no longer has its KV.
  if (config_.preemption == Preemption::kSwap && !victim->prefilling() && victim->computed > 0) {
    step.swap_out_tokens += victim->computed;
    victim->state = RequestState::kSwapped;
  } else {
    victim->computed = 0;
    victim->prefill_target = victim->spec.prompt_tokens + victim->generated;
    victim->state = RequestState::kWaiting;
  }
  cache_.release(victim->spec.id);
}

bool RankScheduler::preempt_waiting_holder(RankStep& step, const Request* head) {
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
    Request* victim = *it;
    if (victim == head || cache_.held_blocks(victim->spec.id) == 0) continue;
    preempt(step, victim);  // keeps its place in the queue
    return true;
  }
  return false;
}

// A decode rank of a disaggregated deployment takes a prefilled request's KV in queue order:
// vLLM puts a preempted request back at the front of the waiting queue, and its decode instance
// allocates blocks for an incoming KV cache only when the scheduler reaches that request in the
// queue, behind it. So while a preempted request (the only kind that waits here holding no
// blocks) is at the front, blocks that free up are its own: reserving them for new hand-overs
// would starve it, and once the rank's running requests were done the hand-overs queued behind it
// would hold every block, it could never be readmitted and the run would stall.
bool RankScheduler::takes_handover(const Request& r) const {
  if (!waiting_.empty() && cache_.held_blocks(waiting_.front()->spec.id) == 0) return false;
  return cache_.can_grow(r.spec.id, r.computed + 1);
}

// A decode step verifies the sequence's drafts: never more than the request still has to
// produce, so its KV never outgrows prompt + output.
std::int64_t RankScheduler::decode_tokens(const Request& r) const {
  const std::int64_t left = std::max<std::int64_t>(1, r.spec.output_tokens - r.generated);
  return std::min(config_.speculative.verify_tokens(), left);
}

std::vector<Request*> RankScheduler::complete(const RankStep& step, const AcceptDrafts& accept) {
  std::vector<Request*> produced;
  produced.reserve(step.chunks.size());
  for (const ScheduledChunk& c : step.chunks) {
    Request* r = c.request;
    const bool decode = !r->prefilling();
    // Speculative decoding: of the chunk's drafts (all but its first token) the accepted prefix
    // and the target's own token come out; the rejected drafts' KV is dropped.
    const std::int64_t drafts = decode ? c.new_tokens - 1 : 0;
    const std::int64_t accepted = drafts > 0 && accept ? std::clamp<std::int64_t>(accept(*r, drafts), 0, drafts) : 0;
    r->computed += decode ? 1 + accepted : c.new_tokens;
    if (r->prefilling()) continue;  // a chunk of a prompt: no token yet
    r->emitted = 1 + accepted;
    r->generated += r->emitted;
    produced.push_back(r);
  }
  return produced;
}

void RankScheduler::retire(Request* r) {
  const auto it = std::find(running_.begin(), running_.end(), r);
  if (it != running_.end()) running_.erase(it);
  const auto w = std::find(waiting_.begin(), waiting_.end(), r);
  if (w != waiting_.end()) waiting_.erase(w);
  cache_.release(r->spec.id);
}

}  // namespace moesim
