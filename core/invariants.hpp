#pragma once
// The invariants every serving run checks (issue 30, class 6), written down once as BLIS writes
// down its own. They are checked in every build, where the state they read is already at hand
// (a request's life cycle, a KV cache's blocks, a MoE layer's plan, an all-to-all's flows), so
// they cost a comparison each. A broken one stops the run with an internal error that names it:
// it is a bug in moesim, never bad input. docs/design.md "Invariants" lists them; the tests that check
// each one cite its name.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace moesim {

enum class Invariant : std::uint8_t {
  kRequestOnce,          ///< request-once: every request arrives once and finishes once
  kExactOutput,          ///< exact-output: a request finishes with exactly its output tokens
  kRequestCausality,     ///< request-causality: arrival <= first scheduled <= first token <= finish
  kKvWithinCapacity,     ///< kv-within-capacity: a GPU's KV blocks in use never exceed its blocks
  kKvBalanced,           ///< kv-balanced: every KV block allocated is freed by the end of the run
  kKvHandOver,           ///< kv-hand-over: a hand-over moves a request's blocks whole, prefill to decode
  kSelectionsConserved,  ///< selections-conserved: a MoE layer computes tokens x top-k minus drops
  kAllToAllBalanced,     ///< all-to-all-balanced: an all-to-all's bytes sent equal its bytes received
  kMetricSet,            ///< metric-set: every serving engine mode reports the same metrics
};

/// The invariant's name as the docs, the error and the tests spell it.
std::string_view invariant_name(Invariant which);

/// A broken invariant: a logic error (the CLI reports "internal error", exit 1).
class InvariantBroken : public std::logic_error {
 public:
  InvariantBroken(Invariant which, const std::string& detail);
  Invariant which() const { return which_; }

 private:
  Invariant which_;
};

/// Throws InvariantBroken unless `holds`; `detail()` (called only then) says what was seen.
template <typename Detail>
inline void check_invariant(bool holds, Invariant which, Detail&& detail) {
  if (!holds) [[unlikely]]
    throw InvariantBroken(which, detail());
}

}  // namespace moesim
