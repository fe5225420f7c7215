#pragma once
// Load-balancing / placement policies. A policy decides where experts live and which GPU runs
// which token; it emits tasks, and the engine times them. Policies register by name with their
// declared options (see registry.cpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "models/workload.hpp"
#include "predictors/forecast.hpp"
#include "core/params.hpp"
#include "core/registry.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// What a policy may look at when deciding (never a cost model: policies do not time things).
/// Which kernels carry an expert-parallel layer's token dispatch and combine.
enum class MoeAllToAll : std::uint8_t {
  kNccl,          ///< pairwise sends over the flow network (NCCL all-to-all, every policy's default)
  kDeepEpNormal,  ///< DeepEP's normal kernels (hardware/deepep.hpp), priced in closed form
  kDeepEpLowLatency,  ///< DeepEP's low-latency kernels
};
const char* moe_all_to_all_name(MoeAllToAll a);  ///< "nccl", "deepep-normal", "deepep-ll"

struct PolicyContext {
  const ModelSpec& model;
  const Cluster& cluster;
  const PrefillWorkload& workload;
  /// Routing of profiling batches, drawn from streams of their own so they are not the batches
  /// that will be simulated: `profile_routing(i, moe_layer)` for i = 0, 1, ... (a profiling
  /// window, as ExFlow profiles a dataset before serving). Empty where no routing model exists.
  std::function<LayerRouting(int profile_batch, int moe_layer)> profile_routing = {};
  /// deployment.alltoall: the dispatch/combine kernels of expert-parallel policies.
  MoeAllToAll alltoall = MoeAllToAll::kNccl;
  /// The scenario's seed: a policy's random choices derive from it (Rng::derive with a stream of
  /// core/rng_streams.hpp), so changing the seed changes them.
  std::uint64_t seed = 0;
};

/// Which GPUs hold a copy of each expert, and the reverse map.
struct ExpertPlacement {
  std::vector<std::vector<int>> gpus_of_expert;
  std::vector<std::vector<int>> experts_on_gpu;
  static ExpertPlacement from_owner(const std::vector<int>& owner, int num_gpus);
};

/// The MoE part of one layer for one batch, as the policy receives it.
struct MoeLayerInput {
  int layer = 0;      ///< model layer index
  int moe_index = 0;  ///< index among MoE layers
  int batch = 0;
  const LayerRouting* routing = nullptr;
  const std::vector<int>* token_home = nullptr;  ///< GPU each token's hidden state lives on
  std::vector<std::int64_t> home_tokens;         ///< tokens per home GPU
  std::vector<TaskId> ready;                     ///< per GPU: router finished
  std::vector<TaskId> layer_start;               ///< per GPU: previous layer done, attention begins
  /// What the scenario's predictor forecast for this layer before its attention (never null
  /// inside plan_batch; Kind::kNone when nothing is predicted).
  const Forecast* forecast = nullptr;
};

/// What the policy reports back for one MoE layer.
struct MoeLayerOutput {
  std::vector<TaskId> done;                ///< per GPU: outputs merged on the home GPU
  std::vector<std::int64_t> gpu_tokens;    ///< expert token-selections computed per GPU
  /// Rows the expert GEMMs ran over per GPU where padding adds to the selections (a dense
  /// dispatch tensor, DeepSpeed); empty: `gpu_tokens`. Sizes the activation memory.
  std::vector<std::int64_t> gpu_rows;
  std::int64_t tokens_dropped = 0;
  /// Bytes the layer's dispatch and combine kept on the token's own GPU (an all-to-all's
  /// diagonal: no transfer). Reported as traffic `intra_gpu`.
  double local_bytes = 0.0;
  /// MoE layers this one stands for (layer sampling, LayerSample); 1 otherwise.
  int repeat = 1;
};

/// Base class of all policies.
class Policy {
 public:
  virtual ~Policy() = default;
  /// Decides the static layout for this model and cluster.
  virtual void setup(const PolicyContext& ctx) = 0;
  /// Adds the tasks of one MoE layer (from router output to merged outputs) to `plan`.
  virtual MoeLayerOutput build_moe_layer(TaskGraph& plan, const PolicyContext& ctx,
                                         const MoeLayerInput& in) = 0;
  /// Bytes of routed-expert weights and policy buffers each GPU holds.
  virtual std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const = 0;
  /// Columns of the expert intermediate a GPU holds per selection it computes (the memory
  /// estimate's activations): the full FFN width (doubled for SwiGLU's gate), unless the policy
  /// shards experts.
  virtual std::int64_t expert_intermediate_width(const PolicyContext& ctx) const;
  /// True when the policy needs only how many selections go from each source GPU to each
  /// expert, so layers may be routed at count level (LayerRouting::by_count); false (the
  /// default) when it looks at individual tokens.
  virtual bool accepts_counts() const { return false; }
};

/// Registry entry: a one-line description is the registry's; this holds options and factory.
/// What a policy's scenario-time check found: problems with its options on this model and
/// cluster. Each names the option it is about ("" = the policy entry itself).
struct PolicyCheck {
  struct Item {
    std::string option;
    std::string message;
  };
  std::vector<Item> errors;    ///< the scenario is rejected (exit 2)
  std::vector<Item> warnings;  ///< reported; the run goes ahead
};

/// What a policy supports, declared with it (not checked by name): the scenario loader, the runner
/// and the planner read these, and `moesim list --markdown` prints them.
struct PolicyCapabilities {
  /// Places whole experts (or their shards and copies) over the instance's GPUs, so it needs
  /// deployment.expert_parallel; false for a policy that lays experts out otherwise.
  bool expert_parallel = true;
  /// Runs prefill workloads (false: serving only).
  bool prefill = true;
  /// Takes an expert-load predictor (false: `predictor: none` only).
  bool predictors = true;
  /// Plans synchronous steps on the serving engine, layer by layer (so serving.layer_sampling
  /// applies); false for a policy the serving engine runs in its layer-queue mode (AMoE's
  /// μ-queues, serving/amoe/layer_queues.hpp), which plans no step and has no Policy object.
  bool stepped = true;
  /// The option by which the policy splits the GPUs itself ("" when the deployment does): it then
  /// takes one colocated, attention-data-parallel instance of every GPU.
  std::string own_layout = {};
};

struct PolicyInfo {
  std::vector<ParamSpec> params;
  /// Builds the policy; empty for a policy that is not `stepped` (its options and capabilities
  /// are all there is of it: the layer-queue runtime does its work).
  std::function<std::unique_ptr<Policy>(const ParamSet&)> make;
  /// Optional: checks the options against the model and cluster when the scenario loads, so
  /// that bad combinations are located errors (or warnings) before anything runs.
  std::function<void(const ParamSet&, const ModelSpec&, const ClusterSpec&, PolicyCheck&)> check = {};
  PolicyCapabilities supports = {};
};
Registry<PolicyInfo>& policies();

/// The most profiling batches a profiled placement (GRACE, ExFlow) may ask for: each is routed in
/// full before serving starts, so the count is work, and ten thousand is far past any paper's.
inline constexpr double kMaxProfileBatches = 10000.0;

/// The `placement` option shared by policies that start from a static layout.
ParamSpec placement_param();
/// PolicyInfo::check for one-copy static placements: fewer experts than GPUs leaves GPUs with
/// no expert (legal, but seldom meant): a warning.
void warn_gpus_without_experts(const ParamSet& p, const ModelSpec& m, const ClusterSpec& c, PolicyCheck& found);
/// Owner GPU of each expert: "contiguous" (expert e on GPU ⌊e·G/E⌋) or "round-robin" (e mod G).
std::vector<int> static_owner(const std::string& placement, int experts, int gpus);

}  // namespace moesim
