#include "serving/request.hpp"

#include <algorithm>
#include <string>

#include "core/invariants.hpp"

namespace moesim {

namespace {
constexpr std::int64_t kReservedGaps = 1 << 16;
std::string named(const Request& r) { return "request " + std::to_string(r.spec.id); }
}  // namespace

void Request::arrive(Tick now) {
  check_invariant(state == RequestState::kPending && arrived < 0, Invariant::kRequestOnce,
                  [&] { return named(*this) + " arrived twice (first at tick " + std::to_string(arrived) + ")"; });
  arrived = now;
}

void Request::mark_scheduled(Tick now) {
  if (first_scheduled >= 0) return;
  check_invariant(arrived >= 0 && now >= arrived, Invariant::kRequestCausality, [&] {
    return named(*this) + " scheduled at tick " + std::to_string(now) + " before it arrived (" + std::to_string(arrived) + ")";
  });
  first_scheduled = now;
}

void Request::record_tokens(Tick now, std::int64_t tokens, InterTokenGaps& gaps) {
  check_invariant(generated <= spec.output_tokens, Invariant::kExactOutput, [&] {
    return named(*this) + " produced " + std::to_string(generated) + " of its " + std::to_string(spec.output_tokens) +
           " output tokens";
  });
  check_invariant(first_scheduled >= 0 && now >= first_scheduled && now >= last_token, Invariant::kRequestCausality, [&] {
    return named(*this) + " produced a token at tick " + std::to_string(now) + " (scheduled at " +
           std::to_string(first_scheduled) + ", last token at " + std::to_string(last_token) + ")";
  });
  if (first_token < 0) {
    first_token = now;
  } else {
    const std::int64_t n = tokens > 1 ? tokens : 1;
    const double gap = ticks_to_ms(now - last_token) / static_cast<double>(n);
    // Room for every gap at once (capped: a 10^8-token request grows as it goes), so a serving
    // run does not reallocate and copy each request's gaps a dozen times.
    if (itl.empty()) itl.reserve(static_cast<std::size_t>(std::min<std::int64_t>(spec.output_tokens, kReservedGaps)));
    const InterTokenGaps::Id id = gaps.intern(gap);
    for (std::int64_t i = 0; i < n; ++i) itl.push_back(id);
    itl_max_ms = std::max(itl_max_ms, gap);
  }
  last_token = now;
}

void Request::hand_over(Tick now, int to_pool, int to_rank, int to_gpu) {
  check_invariant(state == RequestState::kTransferring && first_token < 0, Invariant::kRequestOnce,
                  [&] { return named(*this) + " handed over twice, or without a prefill"; });
  pool = to_pool;
  rank = to_rank;
  gpu = to_gpu;
  prefill_only = false;
  first_token = now;
  last_token = now;
}

void Request::finish(Tick now) {
  check_invariant(state != RequestState::kFinished && finished < 0, Invariant::kRequestOnce,
                  [&] { return named(*this) + " finished twice"; });
  check_invariant(generated == spec.output_tokens, Invariant::kExactOutput, [&] {
    return named(*this) + " finished with " + std::to_string(generated) + " output tokens, not " +
           std::to_string(spec.output_tokens);
  });
  check_invariant(arrived >= 0 && first_scheduled >= arrived && first_token >= first_scheduled && last_token >= first_token &&
                      now >= last_token,
                  Invariant::kRequestCausality, [&] {
                    return named(*this) + ": arrived " + std::to_string(arrived) + ", first scheduled " +
                           std::to_string(first_scheduled) + ", first token " + std::to_string(first_token) +
                           ", last token " + std::to_string(last_token) + ", finished " + std::to_string(now) + " (ticks)";
                  });
  state = RequestState::kFinished;
  finished = now;
}

}  // namespace moesim
