#pragma once
// Builds the task graph of one step through the whole model. Attention runs data-parallel: each
// GPU attends over the sequences it holds (prefill chunks and decode tokens together, priced by
// query tokens and KV length); or, when the shape asks, tensor-parallel as MoE-GPS §2 assumes
// (every GPU runs 1/G of the heads over every sequence, a ring all-reduce sums the output, and
// the tokens are then shared evenly for the MoE layer; from the second layer on, a ring
// all-gather first gives every GPU the previous layer's outputs). Dense FFN layers run locally; each MoE layer is the router
// followed by the policy's tasks. Layers chain per GPU, with no barrier other than those the
// policy's collectives imply. A prefill batch (serving/batch_planner.hpp) is the step in which
// every sequence is a whole prompt. StepBuilder plans a step one layer at a time, so that a long
// step can run while it is planned (PlanExecutor::run_fed); plan_step plans it whole.
#include <cstdint>
#include <vector>

#include "models/operators.hpp"
#include "policies/policy.hpp"
#include "predictors/forecast.hpp"

namespace moesim {

/// What each GPU runs in one step: its sequences' chunks, and KV-cache swaps (bytes between the
/// GPU and its node's host memory) that must finish before its first layer.
/// Layer sampling (serving.layer_sampling, an approximation, off at 1): the MoE layers are cut
/// into blocks of `every` consecutive ones (the last may be shorter) and each step plans one layer
/// per block, standing for the whole block (Task::repeat): its times and bytes count that many
/// times over. Which layer of a block rotates with the step, so every layer is sampled in turn.
struct LayerSample {
  int every = 1;   ///< MoE layers per block; 1: every layer planned (exact)
  int offset = 0;  ///< the sampled position inside each block (the step number)
  /// Whether MoE layer `moe` (of `moe_layers`) is planned.
  bool planned(int moe, int moe_layers) const;
  /// The layers MoE layer `moe` stands for when planned: its block's size.
  int weight(int moe, int moe_layers) const;
  /// The first planned MoE layer from `moe` on (`moe_layers` when none is left). Loops over the
  /// layers step from one planned layer to the next with it: planned() costs two divisions, and
  /// a step asks of every layer several times.
  int next_planned(int moe, int moe_layers) const;
};

struct StepShape {
  std::vector<std::vector<SeqChunk>> seqs;  ///< per GPU
  std::vector<double> swap_out_bytes;       ///< per GPU (empty: none)
  std::vector<double> swap_in_bytes;        ///< per GPU (empty: none)
  /// Attention tensor-parallel over all GPUs (StepBuilder); false: data-parallel over `seqs`.
  bool tensor_parallel_attention = false;
  /// A deployment's tensor_parallel: attention groups of this many consecutive GPUs. A group's
  /// chunks are listed at its first GPU; every GPU of the group runs 1/tp of the heads over all
  /// of them, and an all-reduce of the hidden state follows. 1 (and tp_experts false): attention
  /// data-parallel over `seqs`, as before deployments had groups.
  int attention_tp = 1;
  /// The MoE block tensor-parallel inside each attention group (every expert sharded 1/tp, an
  /// all-reduce after the block; deployment.expert_parallel: false) instead of the policy's
  /// expert parallelism over the pool.
  bool tp_experts = false;
  /// The engine's host work for the step (one OpKind::kHost op, hardware/host_cost.hpp, of the
  /// reference time serving/engine_profile.hpp gives; empty: none): before the first layer, or,
  /// with host_overlap, alongside the step (the step then lasts the longer of the two).
  std::vector<Op> host;
  bool host_overlap = false;
  /// Host work the overlap scheduler cannot hide (OpKind::kHost ops, one after another, before the
  /// step's GPU work, with or without host_overlap): the issue of an eager step's kernels
  /// (EngineProfile::eager_layer_us) and the engine's serial per-step time (host_serial_us).
  std::vector<Op> serial_host;
  /// With tp_experts: a group's experts split over this many of its GPUs (contiguous expert
  /// ranges), each expert sharded over attention_tp / moe_expert_parallel of them.
  int moe_expert_parallel = 1;
  /// Most new tokens of a chunk with cached context that MLA runs absorbed (1 + drafts when a
  /// speculative step verifies drafts).
  std::int64_t mla_absorbed_max_new = kMlaAbsorbedMaxNewTokens;
  /// Speculative decoding's drafts, run after the target's layers: `draft_passes` sequential passes
  /// of `draft`'s layers, each over one new token of every sequence in `draft_seqs` (per GPU, as
  /// `seqs`). `draft_mtp`: the draft is the model's MTP module, which first joins the token's
  /// embedding and hidden state (two norms and eh_proj, DeepSeek-V3 §2.2). Each pass ends with the
  /// LM head, vocabulary-parallel over the group. The draft's MoE layers run where the target's
  /// experts are, on each GPU's even share of the selections (no dispatch of their own).
  const ModelSpec* draft = nullptr;
  int draft_passes = 0;
  bool draft_mtp = false;
  std::vector<std::vector<SeqChunk>> draft_seqs;
  /// Which MoE layers are planned (layer sampling; default: all).
  LayerSample sample;
  /// True when attention runs in groups (attention_tp > 1 or tp_experts).
  bool grouped() const { return attention_tp > 1 || tp_experts; }
  /// Tokens per GPU entering the MoE layers: the sum of its chunks' new tokens; in groups, a
  /// group's tokens split evenly over its GPUs (expert parallel), or all at its first GPU (the
  /// routing source of tensor-parallel experts, which every GPU of the group computes on).
  std::vector<std::int64_t> home_tokens() const;
};

/// One step's plan and what the policy reported per MoE layer.
struct StepPlan {
  TaskGraph graph;
  std::vector<MoeLayerOutput> moe;        ///< per MoE layer
  std::vector<std::int64_t> home_tokens;  ///< tokens per GPU
};

/// Plans a step layer by layer into a plan that may already be running. Each layer depends only
/// on the previous layer's last tasks (and a first layer on the step's start), as PlanFeed needs.
class StepBuilder {
 public:
  /// Adds the step's start to `plan` (its roots, and the KV-cache swaps the first layer waits for).
  StepBuilder(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape, TaskGraph& plan);

  /// The model layer add_layer plans next (the model's layer count once every layer is planned).
  int next_layer() const { return layer_; }
  bool done() const;
  /// Whether the next layer is a MoE layer (one that needs a routing).
  bool next_is_moe() const;
  /// Index among MoE layers of the next MoE layer.
  int next_moe_index() const { return moe_index_; }
  /// Plans the next layer into `plan`. A MoE layer needs its `routing` (read during the call only)
  /// and takes what the predictor forecast for it (null: no forecast); returns the policy's
  /// report for a MoE layer, null for a dense one.
  const MoeLayerOutput* add_layer(TaskGraph& plan, const LayerRouting* routing, const Forecast* forecast);
  /// Tokens per GPU.
  const std::vector<std::int64_t>& home_tokens() const { return home_tokens_; }
  /// Plans the speculative drafts of `shape` after the last layer (nothing when it has none).
  void add_drafts(TaskGraph& plan, const StepShape& shape);
  /// Passes over the next layer, a MoE layer that layer sampling leaves out: nothing is planned,
  /// and the next layer starts from the state this one would have left.
  void skip_layer();
  /// The policy's report of the last MoE layer planned, moved out.
  MoeLayerOutput take_moe_output() { return std::move(moe_out_); }

 private:
  /// Tensor-parallel attention of `layer` on every GPU: (all-gather,) heads, ring all-reduce.
  /// Returns, per GPU, the task after which its share of the tokens is ready for the router.
  std::vector<TaskId> add_tensor_parallel_attention(TaskGraph& plan, int layer);
  /// A layer of a deployment with attention groups (StepShape::grouped()).
  const MoeLayerOutput* add_grouped_layer(TaskGraph& plan, int layer, bool moe, const LayerRouting* routing,
                                          const Forecast& forecast);
  /// The policy's input for MoE layer `layer` (its index taken), starting from last_.
  MoeLayerInput moe_input(int layer, const LayerRouting* routing, const Forecast& forecast);
  /// The GPU of each token, laid out GPU by GPU, for `r`; built the first time a token-level
  /// routing asks (a count-level one reads none of it: for_each_selection, assign_home_first).
  const std::vector<int>& token_home_of(const LayerRouting& r);
  /// GPUs of attention group k.
  std::vector<int> group_gpus(int k) const;
  /// GPUs of the k-th run of `size` consecutive GPUs.
  std::vector<int> group_gpus_of(int k, int size) const;
  /// GPU g's attention ops in `layer` (global layers of interleaved models have their own).
  const std::vector<Op>& attention_of(int g, int layer) const;

  Policy& policy_;
  const PolicyContext& ctx_;
  int step_;
  std::vector<std::int64_t> home_tokens_;
  std::vector<int> token_home_;              ///< GPU of each token (token_home_of), built on demand
  std::vector<std::vector<Op>> attention_;   ///< per GPU: the same in every (windowed) layer
  std::vector<std::vector<Op>> global_attention_;  ///< per GPU: full-attention layers (interleaved models)
  bool tensor_parallel_ = false;             ///< attention tensor-parallel (see the file comment)
  int group_tp_ = 1;                         ///< attention group size (StepShape::attention_tp)
  bool grouped_ = false;                     ///< StepShape::grouped()
  bool tp_experts_ = false;                  ///< StepShape::tp_experts
  int moe_ep_ = 1;                           ///< StepShape::moe_expert_parallel
  bool split_ = false;                       ///< groups' tokens left split over their GPUs by the last layer
  std::vector<std::int64_t> group_tokens_;   ///< new tokens per attention group
  ModelSpec slice_;                          ///< one GPU's share of the model under group_tp_
  std::vector<TaskId> last_;                 ///< per GPU: hidden states ready for the next layer
  int layer_ = 0;
  int moe_index_ = 0;
  MoeLayerOutput moe_out_;
};

/// Plans step `step` (the routing models' and policies' batch index). `routing[i]` routes the
/// i-th MoE layer's tokens, which are laid out GPU by GPU in `shape` order; `forecasts[i]`, if
/// given, is what the predictor forecast for that layer. A forecast's overhead is spent on
/// every GPU before that layer's attention (the predictor runs there, MoE-GPS §3.1).
StepPlan plan_step(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                   const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts = nullptr);
/// plan_step into `sp`, which is cleared first: a serving engine plans every step into the plan
/// of an earlier one, reusing its memory.
void plan_step_into(StepPlan& sp, Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                    const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts = nullptr);
/// Empties a plan, keeping its memory.
void clear_plan(StepPlan& sp);


}  // namespace moesim
