// `grace`: GRACE-MoE (§4) on the prefill engine — a first version. From a profiling window
// (PolicyContext::profile_routing, untimed, before serving) each MoE layer gets its expert
// affinity (co-activations: tokens choosing both experts) and expert loads; then
//  - grouping (§4.1): `uniform` (experts in equal contiguous blocks, as vLLM and DeepSpeed place
//    them) or `hierarchical` (spectral node groups, controlled GPU groups of ratio r; r = -1 takes
//    the knee of Eq. 1 over r in {0, 0.125, ..., 1});
//  - replication (§4.2): `none`, `fixed` (one copy of the heaviest group's hot experts on the least
//    loaded GPU) or `dynamic` (Eq. 2 copies);
//  - routing (§4.3): `home` (the primary copy), `wrr` (weighted draw over the copies, weights the
//    inverse of Eq. 3's predicted loads) or `topology-aware` (Algorithm 5).
// Communication (§5.1): a token bound to several experts on one GPU is sent there once, and with
// `alltoall: hierarchical` (the default, as the paper implements it) a token bound for another
// node crosses the node boundary once and is fanned out inside that node
// (hardware/hierarchical_all_to_all.hpp).
#include <algorithm>
#include <map>
#include <string>

#include "core/rng.hpp"
#include "hardware/hierarchical_all_to_all.hpp"
#include "policies/expert_parallel.hpp"
#include "policies/grace/grouping.hpp"
#include "policies/grace/replication.hpp"
#include "policies/policy.hpp"

namespace moesim {
namespace {

/// One MoE layer's placement: the hosts of each expert (primary first) and, for each expert
/// with replicas, its hosts' routing weights (1 / predicted load, Eq. 3).
struct GraceLayer {
  std::vector<std::vector<int>> hosts;           ///< per expert
  std::vector<std::map<int, double>> weights;    ///< per expert: host GPU -> weight
};

/// GRACE-MoE's grouping, replication and routing (see the file comment).
class Grace final : public ExpertParallelPolicy {
 public:
  explicit Grace(const ParamSet& p)
      : hierarchical_(p.get_string("grouping") == "hierarchical"),
        replication_(p.get_string("replication")),
        routing_(p.get_string("routing")),
        ratio_(p.get_float("ratio")),
        node_level_(p.get_string("alltoall") == "hierarchical"),
        profile_batches_(static_cast<int>(p.get_int("profile_batches"))) {}

  void setup(const PolicyContext& ctx) override {
    const int E = ctx.model.experts, G = ctx.cluster.num_gpus(), M = ctx.model.num_moe_layers();
    node_of_.clear();
    for (int g = 0; g < G; ++g) node_of_.push_back(ctx.cluster.node_of_gpu(g));
    layers_.assign(static_cast<std::size_t>(M), GraceLayer{});
    for (int l = 0; l < M; ++l) {
      Eigen::MatrixXd affinity = Eigen::MatrixXd::Zero(E, E);
      std::vector<double> load(static_cast<std::size_t>(E), 0.0);
      for (int b = 0; ctx.profile_routing && b < profile_batches_; ++b) add_profile(ctx.profile_routing(b, l), affinity, load);
      place_layer(ctx, affinity, load, layers_[static_cast<std::size_t>(l)]);
    }
  }

  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    std::vector<double> bytes(static_cast<std::size_t>(ctx.cluster.num_gpus()), 0.0);
    for (const GraceLayer& layer : layers_)
      for (const auto& hosts : layer.hosts)
        for (const int g : hosts) bytes[static_cast<std::size_t>(g)] += ctx.model.expert_bytes();
    return bytes;
  }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const LayerRouting& r = *in.routing;
    const GraceLayer& layer = layers_[static_cast<std::size_t>(in.moe_index)];
    Dispatch d(ctx.cluster.num_gpus(), ctx.model.experts);
    Rng rng = Rng::derive(ctx.seed, Stream::kGraceRouting, in.batch, in.moe_index);
    TokenDispatchRows rows(ctx.cluster, node_level_);
    std::vector<int> dests;  // the GPU of each of this token's selections
    for (std::int64_t t = 0; t < r.num_tokens; ++t) {
      const int home = (*in.token_home)[static_cast<std::size_t>(t)];
      dests.clear();
      for (int s = 0; s < r.top_k; ++s) {
        const int e = r.expert(t, s);
        const auto& hosts = layer.hosts[static_cast<std::size_t>(e)];
        int gpu = hosts.front();
        if (hosts.size() > 1 && routing_ != "home") {
          const auto& w = layer.weights[static_cast<std::size_t>(e)];
          gpu = routing_ == "wrr" ? choose_by_polling_weight(w, rng) : topology_aware_route(w, home, node_of_, rng);
        }
        dests.push_back(gpu);
        ++d.load[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(e)];
      }
      rows.add_token(home, dests);
    }
    d.send = rows.first();
    if (rows.has_second_stage()) d.forward = rows.second();
    return d;
  }

 private:
  /// Co-activations (both ways) and loads of one profiling batch.
  static void add_profile(const LayerRouting& r, Eigen::MatrixXd& affinity, std::vector<double>& load) {
    for (std::int64_t t = 0; t < r.num_tokens; ++t)
      for (int a = 0; a < r.top_k; ++a) {
        const int i = r.expert(t, a);
        load[static_cast<std::size_t>(i)] += 1.0;
        for (int b = a + 1; b < r.top_k; ++b) {
          const int j = r.expert(t, b);
          affinity(i, j) += 1.0;
          affinity(j, i) += 1.0;
        }
      }
  }

  void place_layer(const PolicyContext& ctx, const Eigen::MatrixXd& affinity, const std::vector<double>& load,
                   GraceLayer& layer) const {
    const int E = ctx.model.experts, G = ctx.cluster.num_gpus();
    std::vector<int> gpu_of = static_owner("contiguous", E, G);
    const bool profiled = affinity.sum() > 0.0;
    if (hierarchical_ && profiled) {
      const int nodes = ctx.cluster.num_nodes(), per_node = ctx.cluster.spec().gpus_per_node;
      std::vector<double> candidates;
      for (int i = 0; i <= 8; ++i) candidates.push_back(i / 8.0);
      if (nodes == 1) {
        const double r = ratio_ >= 0.0 ? ratio_ : knee_ratio(affinity, G, candidates, ctx.seed);
        const ExpertGroups groups = controlled_grouping(affinity, G, r, ctx.seed);
        for (int g = 0; g < G; ++g)
          for (const int e : groups[static_cast<std::size_t>(g)]) gpu_of[static_cast<std::size_t>(e)] = g;
      } else {
        // The knee is taken on the whole layer's GPU-level grouping; the paper picks it per set-up.
        const double r = ratio_ >= 0.0 ? ratio_ : knee_ratio(affinity, G, candidates, ctx.seed);
        gpu_of = hierarchical_grouping(affinity, nodes, per_node, r, ctx.seed);
      }
    }
    layer.hosts.assign(static_cast<std::size_t>(E), {});
    for (int e = 0; e < E; ++e) layer.hosts[static_cast<std::size_t>(e)] = {gpu_of[static_cast<std::size_t>(e)]};
    std::vector<double> predicted(static_cast<std::size_t>(G), 0.0);
    for (int e = 0; e < E; ++e) predicted[static_cast<std::size_t>(gpu_of[static_cast<std::size_t>(e)])] += load[static_cast<std::size_t>(e)];
    if (replication_ != "none" && profiled) {
      const ReplicationPlan plan = plan_replication(load, gpu_of, G, replication_ == "fixed");
      for (const int e : plan.hot_experts)
        for (const int g : plan.target_gpus) layer.hosts[static_cast<std::size_t>(e)].push_back(g);
      predicted = plan.predicted_load;
    }
    // Routing weights, inversely proportional to the predicted loads (§4.3), once per layer.
    layer.weights.assign(static_cast<std::size_t>(E), {});
    for (int e = 0; e < E; ++e)
      for (const int g : layer.hosts[static_cast<std::size_t>(e)])
        layer.weights[static_cast<std::size_t>(e)].emplace(g, 1.0 / std::max(1.0, predicted[static_cast<std::size_t>(g)]));
  }

  bool hierarchical_;
  std::string replication_;
  std::string routing_;
  double ratio_;
  bool node_level_;
  int profile_batches_;
  std::vector<int> node_of_;
  std::vector<GraceLayer> layers_;
};

const bool registered = policies().add(
    "grace",
    "GRACE-MoE: affinity grouping (uniform | hierarchical spectral), dynamic replication of "
    "hot experts (none | fixed | dynamic), routing home | weighted round-robin | topology-aware",
    PolicyInfo{{ParamSpec{"grouping", ParamType::kString, "hierarchical", "",
                          "uniform: equal contiguous expert blocks per GPU; hierarchical: spectral node groups, "
                          "then controlled GPU groups (§4.1)",
                          {}, {}, {"uniform", "hierarchical"}},
                ParamSpec{"ratio", ParamType::kFloat, "-1", "",
                          "non-uniformity ratio r of the GPU-level groups (Algorithm 3); -1 = the knee of Eq. 1",
                          -1.0, 1.0, {}},
                ParamSpec{"replication", ParamType::kString, "dynamic", "",
                          "none; fixed: one copy of the heaviest group's hot experts on the least loaded GPU; "
                          "dynamic: Eq. 2's copies (§4.2)",
                          {}, {}, {"none", "fixed", "dynamic"}},
                ParamSpec{"routing", ParamType::kString, "topology-aware", "",
                          "home: the primary copy; wrr: weighted draw, weights 1/predicted load (Eq. 3); "
                          "topology-aware: same GPU, then same node, then any (Algorithm 5)",
                          {}, {}, {"home", "wrr", "topology-aware"}},
                ParamSpec{"alltoall", ParamType::kString, "hierarchical", "",
                          "hierarchical: a token crosses to each other node once and is forwarded inside it "
                          "(§5.1); flat: sent to each destination GPU directly (once per GPU)",
                          {}, {}, {"hierarchical", "flat"}},
                ParamSpec{"profile_batches", ParamType::kInt, "4", "batches",
                          "profiling batches the affinity and loads come from (untimed, before serving)", 0.0,
                          kMaxProfileBatches, {}}},
               [](const ParamSet& p) { return std::make_unique<Grace>(p); },
               [](const ParamSet& p, const ModelSpec& m, const ClusterSpec& c, PolicyCheck& found) {
                 const double r = p.get_float("ratio");
                 if (r < 0.0 && r != -1.0)
                   found.errors.push_back({"ratio", "'ratio' must be in [0, 1] (Algorithm 3's r), or -1 for the knee "
                                                    "of Eq. 1; got " + p.get_string("ratio")});
                 const int gpus = c.nodes * c.gpus_per_node;
                 // Algorithm 1 gives each of the D groups ⌊N_e / D⌋ >= 1 experts.
                 if (m.experts < gpus)
                   found.errors.push_back({"", "needs at least one expert per GPU to group (" + std::to_string(m.experts) +
                                                   " experts on " + std::to_string(gpus) + " GPUs)"});
                 if (c.nodes == 1 && p.get_string("grouping") == "hierarchical")
                   found.warnings.push_back({"grouping", "a single-node cluster has no node level: hierarchical "
                                                          "grouping groups GPUs only (Algorithm 3 over the GPUs)"});
               }});

}  // namespace
}  // namespace moesim
