// harmoeny: HarMoEny §IV. Static expert layout (as static-ep); per layer, after routing:
//  - metadata exchange (Alg. 1 step 2): every GPU all-gathers the others' token-to-expert
//    counts, E counters per GPU;
//  - token scheduling (Alg. 1 step 3): the initial schedule S from each token's home GPU and its
//    expert's owner, then Algorithm 2's greedy rebalancing with token threshold q (Eq. 4),
//    a CPU-side step whose cost is the `schedule_us` parameter;
//  - scatter, expert compute, gather as in barrier expert parallelism (the base class), where a
//    GPU given tokens for an expert it does not hold fetches that expert's weights from host
//    memory into the buffer of an expert that has finished (§IV-C), asynchronously on the
//    host-to-device copy engine or, for the §V-C1 ablation, synchronously.
#include "policies/harmoeny.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "hardware/collectives.hpp"
#include "core/diagnostics.hpp"
#include "hardware/host_cost.hpp"
#include "hardware/phase.hpp"

namespace moesim {

std::int64_t TokenSchedule::total() const { return std::accumulate(s_.begin(), s_.end(), std::int64_t{0}); }

std::vector<std::int64_t> TokenSchedule::per_destination() const {
  // S is stored with g_to fastest: one linear pass.
  std::vector<std::int64_t> t(static_cast<std::size_t>(gpus_), 0);
  for (std::size_t i = 0; i < s_.size(); i += static_cast<std::size_t>(gpus_))
    for (int g = 0; g < gpus_; ++g) t[g] += s_[i + static_cast<std::size_t>(g)];
  return t;
}

TokenSchedule harmoeny_initial_schedule(const LayerRouting& routing, const std::vector<int>& token_home,
                                        const std::vector<int>& owner, int gpus) {
  TokenSchedule s(gpus, static_cast<int>(owner.size()));
  for_each_selection(routing, token_home,
                     [&](int g, int e, std::int64_t n) { s(g, e, owner[static_cast<std::size_t>(e)]) += n; });
  return s;
}

// Terminates: each move shifts t_s >= q >= 1 selections (t_move >= q, and g_min has at least q of
// room) from a GPU above t_avg to one that stays at or below it, so the excess over t_avg shrinks.
std::vector<RebalanceMove> harmoeny_rebalance(TokenSchedule& s, std::int64_t q) {
  if (q < 1) throw std::invalid_argument("harmoeny_rebalance: q must be >= 1");
  const int G = s.gpus(), E = s.experts();
  std::vector<RebalanceMove> moves;
  // Alg. 2 lines 4-5. The token counts are non-negative, so integer division is the floor.
  const std::int64_t t_avg = s.total() / G;
  std::vector<std::int64_t> t = s.per_destination();
  // std::max_element / min_element return the first extreme element: the lowest index on ties.
  auto argmax = [](const std::vector<std::int64_t>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  std::vector<std::int64_t> from_sum(static_cast<std::size_t>(G)), row(static_cast<std::size_t>(E));
  while (std::any_of(t.begin(), t.end(), [&](std::int64_t x) { return x > t_avg; })) {  // line 6
    const int g_max = argmax(t);                                                       // line 7
    for (int f = 0; f < G; ++f) {                                                       // line 8
      from_sum[f] = 0;
      for (int e = 0; e < E; ++e) from_sum[f] += s(f, e, g_max);
    }
    const int g_from = argmax(from_sum);
    for (int e = 0; e < E; ++e) row[e] = s(g_from, e, g_max);                           // line 9
    const int e_max = argmax(row);
    const std::int64_t t_move = row[e_max];                                             // line 11
    if (t_move < q) break;                                                              // lines 12-13
    const int g_min = static_cast<int>(std::min_element(t.begin(), t.end()) - t.begin());  // line 15
    if (g_min == g_max || t[g_min] + q > t_avg) break;                                  // lines 16-17
    const std::int64_t t_s = std::min(t_move, t_avg - t[g_min]);                        // line 19
    s(g_from, e_max, g_max) -= t_s;                                                     // lines 20-23
    s(g_from, e_max, g_min) += t_s;
    t[g_max] -= t_s;
    t[g_min] += t_s;
    moves.push_back({g_from, e_max, g_max, g_min, t_s});
  }
  return moves;
}

std::int64_t harmoeny_eq4_threshold(const ModelSpec& model, const ClusterSpec& cluster) {
  double phi = cluster.gpu.peak(model.dtype);
  // A dtype the GPU lacks runs at its fp32 rate (ComputeCostModel::peak does the same), so that
  // is the rate an expert computes at.
  if (phi <= 0.0) phi = cluster.gpu.peak(DType::kFp32);
  const double beta = cluster.pcie_bandwidth_GBps * 1e9;
  const double q = std::ceil(phi * dtype_bytes(model.dtype) / (2.0 * beta));
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(q));
}

Dispatch harmoeny_dispatch(const TokenSchedule& s, const ExpertPlacement& layout) {
  const int G = s.gpus(), E = s.experts();
  Dispatch d(G, E);
  for (int f = 0; f < G; ++f)
    for (int e = 0; e < E; ++e)
      for (int g = 0; g < G; ++g) {
        const std::int64_t n = s(f, e, g);
        d.send[f][g] += n;
        d.load[g][e] += n;
      }
  for (int g = 0; g < G; ++g) {
    std::vector<char> resident(static_cast<std::size_t>(E), 0);
    for (const int e : layout.experts_on_gpu[g]) {
      resident[e] = 1;
      // A resident expert without tokens is never run this layer: its buffer is free at once.
      if (d.load[g][e] == 0) ++d.free_buffers[g];
    }
    for (int e = 0; e < E; ++e)
      if (d.load[g][e] > 0 && !resident[e]) d.fetch[g].push_back(e);
  }
  return d;
}

namespace {

/// Bytes of one token-count entry in the metadata exchange: the counts are a torch int64
/// tensor (torch.bincount's dtype) in a PyTorch implementation such as HarMoEny's.
constexpr double kMetadataCounterBytes = 8.0;

class Harmoeny final : public ExpertParallelPolicy {
 public:
  bool accepts_counts() const override { return true; }
  explicit Harmoeny(const ParamSet& p)
      : placement_name_(p.get_string("placement")),
        q_option_(p.get_int("q")),
        rebalance_(p.get_bool("rebalance")),
        fetch_mode_(p.get_string("fetch") == "sync" ? FetchMode::kSync : FetchMode::kAsync),
        restore_(p.get_bool("restore")),
        schedule_us_(p.get_float("schedule_us")) {}

  void setup(const PolicyContext& ctx) override {
    const int E = ctx.model.experts, G = ctx.cluster.num_gpus();
    // A fetched expert overwrites the buffer of one of the GPU's own experts (§IV-C): a GPU
    // without a static expert would have nowhere to load one.
    if (E < G)
      throw InputError(SourceLocation{}, "harmoeny: needs at least one expert per GPU (" + std::to_string(E) +
                                             " experts on " + std::to_string(G) +
                                             " GPUs): fetched experts overwrite a GPU's own expert buffers");
    if (q_option_ == 0)
      throw InputError(SourceLocation{}, "harmoeny: 'q' must be -1 (from Eq. 4) or a positive token count");
    owner_ = static_owner(placement_name_, E, G);
    placement_ = ExpertPlacement::from_owner(owner_, G);
    q_ = q_option_ > 0 ? q_option_ : harmoeny_eq4_threshold(ctx.model, ctx.cluster.spec());
  }

  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    // The static layout in every MoE layer; fetches overwrite those buffers, so nothing extra.
    const double per_layer = ctx.model.expert_bytes() * ctx.model.num_moe_layers();
    std::vector<double> bytes(ctx.cluster.num_gpus(), 0.0);
    for (std::size_t g = 0; g < bytes.size(); ++g)
      bytes[g] = static_cast<double>(placement_.experts_on_gpu[g].size()) * per_layer;
    return bytes;
  }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    TokenSchedule s = harmoeny_initial_schedule(*in.routing, *in.token_home, owner_, ctx.cluster.num_gpus());
    if (rebalance_) harmoeny_rebalance(s, q_);
    Dispatch d = harmoeny_dispatch(s, placement_);
    d.fetch_mode = fetch_mode_;
    d.restore_overwritten = restore_;
    return d;
  }

  std::vector<TaskId> before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                     TaskId all_routed) override {
    const int G = ctx.cluster.num_gpus();
    std::vector<int> gpus(static_cast<std::size_t>(G));
    std::iota(gpus.begin(), gpus.end(), 0);
    // Alg. 1 step 2: each GPU contributes its E per-expert counts; every GPU ends with all G.
    const TaskId routed[] = {all_routed};
    const TaskId gathered = add_ring_all_gather(plan, ctx.cluster, gpus, kMetadataCounterBytes * ctx.model.experts,
                                                phase::kCollective, in.layer, routed);
    // Alg. 1 step 3 runs on every GPU's host thread from the same m_all, so each computes the
    // same S: host work over the E × G counts, whose reference time is `schedule_us` (the
    // host cost model prices it, hardware/host_cost.hpp).
    const TaskId dep[] = {gathered};
    const Op work = host_work("harmoeny.schedule", static_cast<std::int64_t>(ctx.model.experts) * G, schedule_us_ * 1e-6);
    std::vector<TaskId> scheduled(static_cast<std::size_t>(G));
    for (int g = 0; g < G; ++g) scheduled[g] = plan.host(g, phase::kSchedule, in.layer, work, dep);
    return scheduled;
  }

  std::vector<int> resident_experts(const PolicyContext& /*ctx*/, const MoeLayerInput& /*in*/,
                                    int gpu) const override {
    return placement_.experts_on_gpu[gpu];
  }

 private:
  std::string placement_name_;
  std::int64_t q_option_;
  bool rebalance_;
  FetchMode fetch_mode_;
  bool restore_;
  double schedule_us_;
  std::int64_t q_ = 1;
  std::vector<int> owner_;
  ExpertPlacement placement_;
};

const bool registered = policies().add(
    "harmoeny",
    "HarMoEny: metadata all-gather, Alg. 2 token rebalancing with threshold q (Eq. 4), async expert fetch over PCIe",
    PolicyInfo{
        {placement_param(),
         ParamSpec{"q", ParamType::kInt, "-1", "tokens",
                   "token threshold of Alg. 2: a move of fewer selections is never made. -1 = Eq. 4, "
                   "ceil(peak FLOP/s x dtype bytes / (2 x PCIe bytes/s)), the fewest tokens whose expert "
                   "compute outlasts fetching the expert; a positive value overrides",
                   -1.0, 1e9, {}},
         ParamSpec{"rebalance", ParamType::kBool, "true", "",
                   "run Alg. 2; false = the initial schedule only (tokens to their expert's owner, as "
                   "static-ep), the first configuration of the Sec. V-C1 ablation",
                   {}, {}, {}},
         ParamSpec{"fetch", ParamType::kString, "async", "",
                   "async: host-to-device fetches overlap compute on the GPU's other experts (Sec. IV-C); "
                   "sync: the GPU waits for each fetch after its previous expert (Sec. V-C1 middle bar)",
                   {}, {}, {"async", "sync"}},
         ParamSpec{"restore", ParamType::kBool, "true", "",
                   "after the layer, fetch back the home experts that fetches overwrote (on the copy "
                   "engine, off the critical path): each layer's own weights are overwritten, and the "
                   "next batch needs the static layout again; false = assume they are back for free",
                   {}, {}, {}},
         ParamSpec{"schedule_us", ParamType::kFloat, "20", "us",
                   "host time of Alg. 1 step 3 per layer (initial schedule + Alg. 2). Default: this C++ "
                   "Alg. 2 over S[G][E][G] (8 x 128 x 8 int64, 64 KB; a few passes over S plus one G x E "
                   "scan per move) took 16-25 us on a 2-core x86 VM. HarMoEny's PyTorch scheduler took "
                   "20-31% of the layer (Sec. V-C1): raise this to model it (at most a second)",
                   0.0, 1e6, {}}},
        [](const ParamSet& p) { return std::make_unique<Harmoeny>(p); }});

}  // namespace
}  // namespace moesim
