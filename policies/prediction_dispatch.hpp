#pragma once
// Acting on an expert-load forecast (MoE-GPS §3.1–3.3), as functions a policy composes: the map
// Algorithm 1 plans the placement on, the realised dispatch of the true selections within that
// placement, the compute error model that raises the bottleneck GPU, and the communication each
// prediction strategy implies. moegps-dup uses them; any policy that duplicates experts ahead of
// routing can.
//
// Everything works on items, one per top-k selection, indexed like LayerRouting::experts
// (token t, slot s at t·top_k + s). Policies decide, the engine times: nothing here has a duration.
#include <cstdint>
#include <vector>

#include "policies/expert_parallel.hpp"
#include "policies/moegps_dup.hpp"
#include "predictors/forecast.hpp"

namespace moesim {

/// Largest-remainder apportionment: ⌊n·share_e⌋ items per expert, plus one for the experts with
/// the largest fractional parts (lowest index on ties) until the counts sum to exactly n. Shares
/// are normalised by their sum (which must be positive; none negative).
std::vector<std::int64_t> apportion(const std::vector<double>& share, std::int64_t n);

/// The token→expert map Algorithm 1 plans the layer's placement on, for `r`'s selections:
/// kTokens the predicted expert of each selection; kDistribution a synthetic map of
/// apportion(expert_share, N) items per expert, in expert order (the items stand for no token:
/// Algorithm 1's placement depends only on how many items of each expert it sees). Throws
/// std::invalid_argument for kNone or a forecast that does not fit `r`.
std::vector<std::int32_t> planned_items(const Forecast& f, const LayerRouting& r);

/// The load MoE-GPS §3.3's error model asks of the bottleneck GPU, which computes
/// `bottleneck_load` of `total` selections over `gpus` GPUs (avg = total/gpus): optimistic
/// leaves it; typical ⌈(1 + ε)·avg⌉; pessimistic ⌈avg + ε·total⌉ = ⌈(1 + G·ε)·avg⌉. Never below
/// `bottleneck_load`, never above `total`.
std::int64_t error_target(ErrorModel model, double eps, std::int64_t bottleneck_load, std::int64_t total, int gpus);

/// What realising the compute error model did.
struct ErrorRealisation {
  int bottleneck = 0;                  ///< b: the most loaded GPU before (lowest index on ties)
  std::int64_t target = 0;             ///< error_target for b
  std::int64_t moved = 0;              ///< selections moved onto b
  std::int64_t shortfall = 0;          ///< target − b's final load (> 0: too few movable selections)
  std::vector<std::int64_t> gpu_load;  ///< selections per GPU after
};

/// Realises the compute error model on `gpu_of_item` (every item on a GPU hosting its expert in
/// `gpus_of_expert`): the bottleneck GPU b is raised to error_target by moving onto it items of
/// experts b hosts that other GPUs compute, one at a time from the most loaded such GPU (lowest
/// index on ties), items flagged in `prefer` first, then in item order. No copy is made: when
/// too few such items exist, b ends as high as it can and the shortfall is reported.
ErrorRealisation apply_compute_error(ErrorModel model, double eps, const std::vector<std::int32_t>& item_expert,
                                     const std::vector<std::vector<int>>& gpus_of_expert, std::vector<int>& gpu_of_item,
                                     int gpus, const std::vector<char>& prefer = {});

/// Places every item with gpu_of_item[i] < 0 on a GPU hosting its expert, keeping the others
/// (pinned): experts with fewest hosts first (they have the least choice), then most unplaced
/// items, then lowest index; each item on its expert's least loaded host (lowest index on ties).
void place_unpinned(const std::vector<std::int32_t>& item_expert, const std::vector<std::vector<int>>& gpus_of_expert,
                    std::vector<int>& gpu_of_item, int gpus);

/// Per-item decisions as a Dispatch: load[c][e] for each item computed on c. With `sits_on`
/// empty, every selection scatters from its token's home (send[home][c]) and the gather is the
/// reverse. Otherwise a selection already sitting on a GPU skips the scatter: send[sits][c] only
/// where sits ≠ c, and its output returns home in the gather (gather[c][home]).
Dispatch items_to_dispatch(const LayerRouting& r, const std::vector<int>& home, const std::vector<int>& compute_gpu,
                           const std::vector<int>& sits_on, int gpus, int experts);

/// What Algorithm 1 may spend on one layer's copies.
struct CopyBudget {
  std::vector<std::vector<int>> placement;  ///< the static hosts of each expert (owner first)
  std::vector<double> memory_bytes;         ///< M_g; its size is the GPU count
  double expert_bytes = 0.0;                ///< params(e)
  int max_copies = 1;                       ///< C_max, hosts per expert including the owner
};

/// One layer's decision from a forecast, with what led to it (for tests and metrics).
struct ForecastDispatch {
  Dispatch dispatch;
  std::vector<std::vector<int>> gpus_of_expert;  ///< the placement the copies bring into being
  std::vector<int> compute_gpu;                  ///< per item: the GPU that computes it
  std::vector<int> sits_on;                      ///< kTokens, per item: where it is when the scatter starts
  ErrorRealisation error;
  std::int64_t mispredicted = 0;                 ///< kTokens: items whose predicted expert was wrong
};

/// moegps-dup's dispatch of `r` (tokens living on `home`) given forecast `f` (MoE-GPS §3.1–3.3):
/// kNone — static-ep: every selection to its expert's owner, no copies;
/// kDistribution / kTokens — Algorithm 1 on planned_items picks the placement (its copies start
/// at the layer start), the true selections fill the plan within it (place_unpinned for the
/// rest), apply_compute_error with ε = f.error, and the communication of the strategy
/// (prediction_dispatch.cpp details both).
ForecastDispatch dispatch_on_forecast(const Forecast& f, const LayerRouting& r, const std::vector<int>& home,
                                      const CopyBudget& budget);

}  // namespace moesim
