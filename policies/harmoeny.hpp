#pragma once
// The scheduling step of the `harmoeny` policy (HarMoEny §IV), usable on its own: the token
// schedule S of Algorithm 1 step 3, its initial assignment, Algorithm 2's rebalancing, the token
// threshold q of Eq. 4, and the Dispatch a schedule turns into.
#include <cstdint>
#include <vector>

#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "policies/expert_parallel.hpp"

namespace moesim {

/// S[g_from][e][g_to] (HarMoEny §IV-A step 3): token selections whose hidden state lives on GPU
/// g_from, routed to expert e, computed on GPU g_to.
class TokenSchedule {
 public:
  TokenSchedule(int gpus, int experts)
      : gpus_(gpus), experts_(experts), s_(static_cast<std::size_t>(gpus) * experts * gpus, 0) {}

  int gpus() const { return gpus_; }
  int experts() const { return experts_; }
  std::int64_t& operator()(int from, int expert, int to) { return s_[index(from, expert, to)]; }
  std::int64_t operator()(int from, int expert, int to) const { return s_[index(from, expert, to)]; }
  /// S.SUM(): every selection of the layer.
  std::int64_t total() const;
  /// t_g = S.SUM(dim=(0, 1)): selections each GPU computes.
  std::vector<std::int64_t> per_destination() const;
  bool operator==(const TokenSchedule&) const = default;

 private:
  std::size_t index(int from, int expert, int to) const {
    return (static_cast<std::size_t>(from) * static_cast<std::size_t>(experts_) + static_cast<std::size_t>(expert)) *
               static_cast<std::size_t>(gpus_) +
           static_cast<std::size_t>(to);
  }
  int gpus_;
  int experts_;
  std::vector<std::int64_t> s_;
};

/// INITIALASSIGN (Alg. 1 line 10): every selection goes from its token's home GPU to the GPU
/// owning its expert. With top-k, each of a token's k selections counts once.
TokenSchedule harmoeny_initial_schedule(const LayerRouting& routing, const std::vector<int>& token_home,
                                        const std::vector<int>& owner, int gpus);

/// One step of Algorithm 2: `tokens` selections of (`from`, `expert`) redirected from GPU
/// `overloaded` (g_max) to GPU `to` (g_min).
struct RebalanceMove {
  int from = 0;
  int expert = 0;
  int overloaded = 0;
  int to = 0;
  std::int64_t tokens = 0;
};

/// REBALANCE (HarMoEny Alg. 2, §IV-B) applied to `s` in place, exactly as written; ties of
/// ARGMAX/ARGMIN go to the lowest index (as torch.argmax). Returns the moves in order.
/// Requires q >= 1 (with q = 0 a zero-token move could repeat forever).
std::vector<RebalanceMove> harmoeny_rebalance(TokenSchedule& s, std::int64_t q);

/// Eq. 4: q = ceil(φ · d_type / (2β)), φ the GPU's dense peak FLOP/s for the model's dtype (the
/// fp32 peak where the GPU lacks that dtype, as the compute cost model runs it), d_type its size
/// in bytes, β the host link (PCIe) bandwidth. At least 1.
std::int64_t harmoeny_eq4_threshold(const ModelSpec& model, const ClusterSpec& cluster);

/// The Dispatch of a schedule over a static layout: scatter counts, per-GPU loads, and for each
/// GPU the experts it computes but does not hold (fetched from host memory, in expert order)
/// and its free buffers (resident experts with no selections this layer) (§IV-C).
Dispatch harmoeny_dispatch(const TokenSchedule& s, const ExpertPlacement& layout);

}  // namespace moesim
