#pragma once
// Expert parallelism with barrier all-to-all: the shared mechanics of token-dispatch policies.
// Subclasses fill one hook, `dispatch`, deciding which GPU computes each token selection (and,
// where the policy moves weights, which expert weights travel where); this base turns the
// decision into the scatter all-to-all, the expert GEMMs, the gather all-to-all and the merge on
// each token's home GPU (HarMoEny §II, Fig. 3). Two optional hooks: `before_scatter` adds a step
// between routing and scatter (metadata exchange, a CPU-side schedule), and the weight movements
// in the Dispatch (peer copies of experts, host fetches into reused buffers) are timed here.
#include "policies/policy.hpp"

namespace moesim {

/// An expert's weights copied to a GPU before that GPU computes it in this layer.
struct WeightCopy {
  int expert = 0;
  int src_endpoint = 0;  ///< a GPU holding the expert, or a host memory endpoint
  int dst_gpu = 0;
};

/// When a layer's weight copies may start.
enum class CopyStart : std::uint8_t {
  kLayerStart,     ///< decided ahead (a prediction or a standing placement): overlaps attention
  kAfterRouting,   ///< decided from this batch's routing: after every GPU has routed
  kAfterSchedule,  ///< after the policy's `before_scatter` step
};

/// How host fetches into reused expert buffers run (HarMoEny §IV-C and its ablation §V-C1).
enum class FetchMode : std::uint8_t {
  kAsync,  ///< on the host-to-device copy engine, overlapped with compute on other experts
  kSync,   ///< on the critical path: the GPU waits for each fetch before computing that expert
};

/// A policy's decision for one layer.
struct Dispatch {
  /// send[src][dst]: rows of hidden state moving from GPU src to GPU dst: token selections, or
  /// the slots of a dense dispatch tensor padded to a capacity (DeepSpeed), padding included.
  std::vector<std::vector<std::int64_t>> send;
  /// load[gpu][expert]: selections GPU `gpu` computes for `expert`.
  std::vector<std::vector<std::int64_t>> load;
  /// rows[gpu][expert]: rows the expert GEMMs run over, where they differ from `load`: a dense
  /// dispatch tensor computes its padding like tokens (DeepSpeed's Experts over [G, C, M]), but
  /// padding is no selection. Empty (the default): `load`.
  std::vector<std::vector<std::int64_t>> rows;
  /// One kernel group per expert instead of one grouped GEMM per projection: frameworks that
  /// loop over their local experts (FastMoE's expert_fn, DeepSpeed's Experts.forward) launch
  /// each expert's GEMMs on their own.
  bool per_expert_kernels = false;
  /// gather[src][dst]: expert outputs moving from the GPU that computed them back to their
  /// token's home GPU. Empty (the default): the reverse of `send`. Set when the selections did
  /// not travel home → computing GPU in the scatter (e.g. tokens a token-to-expert prediction
  /// placed on their expert's GPU before attention, MoE-GPS §3.2.2).
  std::vector<std::vector<std::int64_t>> gather;
  /// forward[gateway][dst]: rows a GPU forwards inside its node after the scatter (the second
  /// stage of a node-aware all-to-all, hardware/hierarchical_all_to_all.hpp); the combine runs
  /// both stages backwards. Empty (the default): a one-stage all-to-all. Not with `gather`.
  std::vector<std::vector<std::int64_t>> forward;
  std::int64_t dropped = 0;

  /// Weight copies that must land before the destination computes its experts.
  std::vector<WeightCopy> copies;
  CopyStart copies_start = CopyStart::kLayerStart;

  /// Per GPU: experts with load whose weights are not resident and are fetched from host memory
  /// into a buffer this layer, in fetch order. A GPU with fetches runs one kernel group per
  /// expert (resident experts first, heaviest first, then fetched ones in order) so that a
  /// finished expert's buffer can be overwritten by the next fetch (HarMoEny §IV-C).
  std::vector<std::vector<int>> fetch;
  /// Per GPU: buffers free for fetches before any expert finishes (spare memory, or resident
  /// experts without tokens this layer). Each finished expert frees one more buffer.
  std::vector<int> free_buffers;
  FetchMode fetch_mode = FetchMode::kAsync;
  /// After the layer's merge, fetch back the resident experts whose buffers were overwritten, so
  /// the static layout holds for the next batch (on the copy engine, attributed to no layer).
  bool restore_overwritten = false;

  Dispatch(int gpus, int experts)
      : send(gpus, std::vector<std::int64_t>(gpus, 0)),
        load(gpus, std::vector<std::int64_t>(experts, 0)),
        fetch(gpus),
        free_buffers(gpus, 0) {}
};

/// Base for policies that move tokens to experts over a barrier all-to-all.
class ExpertParallelPolicy : public Policy {
 public:
  MoeLayerOutput build_moe_layer(TaskGraph& plan, const PolicyContext& ctx,
                                 const MoeLayerInput& in) override;

 protected:
  /// Which GPU computes each selection of this layer.
  virtual Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) = 0;
  /// Tasks between "every GPU has routed" (`all_routed`) and the scatter; returns, per GPU, the
  /// task after which that GPU may scatter. Default: nothing in between.
  virtual std::vector<TaskId> before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                             TaskId all_routed);
  /// Experts resident on `gpu` in this layer (for ordering a GPU's per-expert kernels and for the
  /// buffers a fetch may overwrite). Only consulted for GPUs with fetches. Default: none.
  virtual std::vector<int> resident_experts(const PolicyContext& ctx, const MoeLayerInput& in, int gpu) const;

 private:
  /// The expert tasks of one GPU: one grouped GEMM, or per-expert kernels with fetches or when
  /// the Dispatch asks for them.
  /// `restores[gpu]` receives how many resident experts were overwritten (to fetch back later).
  TaskId build_gpu_experts(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in, const Dispatch& d,
                           int gpu, TaskId ready, TaskId fetch_ready, std::vector<int>& restores);
};

}  // namespace moesim
