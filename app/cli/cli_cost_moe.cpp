// `moesim cost moe`: one GPU's fused MoE layer (router output to combined hidden state), as the
// kernel tables time it (../shared/data/kernels/moe.csv): the local experts' grouped GEMMs at the
// loads they get, the activation, and the permute, top-k and combine passes around them. Nothing
// here is fitted to the MoE table: the GEMMs are priced by the GEMM kernel fits, so the table
// checks how the GEMM fits and the load model carry over to the fused kernels.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <nlohmann/json.hpp>

#include "app/cli/cli.hpp"
#include "core/diagnostics.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"

namespace moesim {

std::vector<std::int64_t> moe_local_loads(std::int64_t tokens, int top_k, int experts, int ep, double alpha) {
  const std::int64_t total = tokens * top_k;
  std::vector<std::int64_t> loads(static_cast<std::size_t>(experts), total / experts);
  if (alpha <= 0.0) {
    // Balanced: every expert the same share, the remainder one each to the first experts.
    for (std::int64_t i = 0; i < total % experts; ++i) ++loads[static_cast<std::size_t>(i)];
    return {loads.begin(), loads.begin() + experts / ep};
  }
  // Power law (AIConfigurator's collectors, power_law_logits_v3/v4): per-expert weights drawn from
  // x^-alpha on [1, 0.8 tokens] (on [0.01, 2] when there are fewer assignments than experts),
  // scaled to tokens x top_k and rounded, no expert above `tokens`; the EP rank with the most
  // tokens is the one timed. Here the draws are the distribution's quantiles at (i + 0.5) / E in
  // a fixed shuffled order: the collector's expected loads, the same on every run.
  const bool many = total > experts;
  const double lo = many ? 1.0 : 0.01, hi = many ? std::max(1.0001, 0.8 * static_cast<double>(tokens)) : 2.0;
  const double a = 1.0 - alpha;
  std::vector<double> w(static_cast<std::size_t>(experts));
  for (int i = 0; i < experts; ++i) {
    const double u = (i + 0.5) / experts;
    w[static_cast<std::size_t>(i)] = std::abs(a) < 1e-9 ? lo * std::pow(hi / lo, u)
                                                         : std::pow((std::pow(hi, a) - std::pow(lo, a)) * u + std::pow(lo, a), 1.0 / a);
  }
  std::mt19937_64 rng(12345);
  std::shuffle(w.begin(), w.end(), rng);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::int64_t assigned = 0;
  for (int i = 0; i < experts; ++i) {
    const auto e = static_cast<std::size_t>(i);
    loads[e] = std::min<std::int64_t>(tokens, std::llround(w[e] / sum * static_cast<double>(total)));
    assigned += loads[e];
  }
  // The rounding's and the cap's difference, one token at a time over the experts in order of
  // weight (the collector's rule), never past `tokens`.
  std::vector<int> order(static_cast<std::size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return w[static_cast<std::size_t>(x)] > w[static_cast<std::size_t>(y)]; });
  for (std::size_t i = 0, stuck = 0; assigned != total && stuck < order.size(); i = (i + 1) % order.size()) {
    auto& l = loads[static_cast<std::size_t>(order[assigned < total ? i : order.size() - 1 - i])];
    if (assigned < total && l < tokens) ++l, ++assigned, stuck = 0;
    else if (assigned > total && l > 0) --l, --assigned, stuck = 0;
    else ++stuck;
  }
  const int per = experts / ep;
  int best = 0;
  std::int64_t best_sum = -1;
  for (int r = 0; r < ep; ++r) {
    const std::int64_t s = std::accumulate(loads.begin() + r * per, loads.begin() + (r + 1) * per, std::int64_t{0});
    if (s > best_sum) best_sum = s, best = r;
  }
  return {loads.begin() + best * per, loads.begin() + (best + 1) * per};
}

nlohmann::json moe_cost(const MoeCostArgs& a) {
  const auto bad = [](const char* flag, const std::string& why) { return InputError(SourceLocation{flag, 0, 0}, why); };
  if (a.tokens < 1 || a.tokens > (1 << 24)) throw bad("--tokens", "must be a whole number in [1, 16777216]");
  if (a.hidden < 1 || a.hidden > (1 << 20)) throw bad("--hidden", "must be a whole number in [1, 1048576]");
  if (a.inter < 1 || a.inter > (1 << 20)) throw bad("--inter", "must be a whole number in [1, 1048576]");
  if (a.experts < 1 || a.experts > 65536) throw bad("--experts", "must be a whole number in [1, 65536]");
  if (a.top_k < 1 || a.top_k > a.experts) throw bad("--top-k", "must be a whole number in [1, experts]");
  if (a.tp < 1 || a.inter % a.tp != 0) throw bad("--tp", "must divide --inter");
  if (a.ep < 1 || a.experts % a.ep != 0) throw bad("--ep", "must divide --experts");
  double alpha = 0.0;
  if (a.distribution.rfind("power-law:", 0) == 0) {
    const std::string v = a.distribution.substr(10);
    char* end = nullptr;
    alpha = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !(alpha > 0.0 && alpha <= 10.0))
      throw bad("--distribution", "power-law:ALPHA needs an exponent in (0, 10], got '" + v + "'");
  } else if (a.distribution != "balanced") {
    throw bad("--distribution", "must be balanced or power-law:ALPHA, got '" + a.distribution + "'");
  }
  const bool block = a.dtype == "fp8-block";
  DType dt;
  if (!parse_dtype(block ? "fp8" : a.dtype, dt) || dt == DType::kFp32 || dt == DType::kMxFp4)
    throw bad("--dtype", "must be one of bf16, fp16, fp8, fp8-block, nvfp4");
  if (a.engine != "trtllm" && a.engine != "sglang" && a.engine != "vllm")
    throw bad("--engine", "engine '" + a.engine + "' is not one of trtllm, sglang, vllm");
  ClusterSpec spec;
  if (const auto* g = gpu_presets().find(a.gpu)) spec.gpu = g->value;
  else if (const auto* c = cluster_presets().find(a.gpu)) spec.gpu = c->value.gpu;
  else throw bad("--gpu", unknown_name_message("GPU", a.gpu, gpu_presets().names()));
  if (spec.gpu.peak(dt) <= 0.0) throw bad("--dtype", spec.gpu.name + " has no " + a.dtype + " tensor cores");
  apply_calibration_choice(spec, a.calibration);
  ComputeCostModel model(spec.gpu, ComputeEfficiency{}, spec.calibration);
  model.select_kernels(a.engine, block);

  ModelSpec m;
  m.hidden = a.hidden;
  m.expert_ffn = a.inter;
  m.experts = static_cast<int>(a.experts);
  m.top_k = static_cast<int>(a.top_k);
  m.dtype = dt;
  m.activation = Activation::kSwiGlu;
  const std::vector<std::int64_t> loads = moe_local_loads(a.tokens, m.top_k, m.experts, static_cast<int>(a.ep), alpha);
  const std::int64_t local = std::accumulate(loads.begin(), loads.end(), std::int64_t{0});
  std::vector<Op> ops = sharded_expert_ops(m, loads, static_cast<int>(a.tp), true);
  // Around the experts: top-k over the router's output, the permutation of the token copies into
  // expert order and their weighted combination back (combine_ops), all memory passes.
  ops.insert(ops.begin(), make_elementwise("moe.topk", static_cast<double>(a.tokens) * static_cast<double>(a.experts), m.dtype));
  ops.insert(ops.begin() + 1, make_elementwise("moe.permute", static_cast<double>(local) * static_cast<double>(a.hidden), m.dtype));
  for (Op& op : combine_ops(m, a.tokens)) ops.push_back(std::move(op));
  nlohmann::json parts = nlohmann::json::array();
  double seconds = 0.0;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kGroupedGemm && op.batch == 0) continue;
    const double s = model.kernel_seconds(op);
    seconds += s;
    const GemmKernelFit* fit = (op.kind == OpKind::kGemm || op.kind == OpKind::kGroupedGemm) ? model.gemm_fit(op.dtype) : nullptr;
    parts.push_back({{"op", op.name}, {"us", s * 1e6}, {"priced_by", fit ? "fit" : "datasheet"}});
  }
  const std::int64_t max_load = loads.empty() ? 0 : *std::max_element(loads.begin(), loads.end());
  nlohmann::json j{{"op", "moe"}, {"gpu", spec.gpu.name}, {"engine", a.engine}, {"dtype", a.dtype},
                   {"distribution", a.distribution}, {"tokens", a.tokens}, {"local_experts", loads.size()},
                   {"local_token_copies", local}, {"max_expert_tokens", max_load},
                   {"calibration", spec.calibration ? (a.calibration.empty() ? std::string("builtin") : a.calibration) : "none"},
                   {"time_us", seconds * 1e6}};
  if (a.explain) j["explain"] = {{"ops", parts}, {"loads", loads}};
  return j;
}

MoeCostCommand::MoeCostCommand(CLI::App& cost) {
  cmd_ = cost.add_subcommand("moe", "one GPU's fused MoE layer (router output to combined output) at the loads its experts get");
  cmd_->add_option("--gpu", args_.gpu, "GPU preset, or a hardware preset meaning its GPU")->required();
  cmd_->add_option("--tokens", args_.tokens, "tokens on this GPU")->required();
  cmd_->add_option("--hidden", args_.hidden, "hidden size")->required();
  cmd_->add_option("--inter", args_.inter, "an expert's intermediate size (before --tp)")->required();
  cmd_->add_option("--top-k", args_.top_k, "experts per token")->required();
  cmd_->add_option("--experts", args_.experts, "routed experts")->required();
  cmd_->add_option("--tp", args_.tp, "MoE tensor parallelism: each expert's intermediate split this many ways (default 1)");
  cmd_->add_option("--ep", args_.ep, "expert parallelism: experts / ep on this GPU (default 1)");
  cmd_->add_option("--dtype", args_.dtype, "bf16 | fp16 | fp8 | fp8-block | nvfp4 (default bf16)");
  cmd_->add_option("--distribution", args_.distribution,
                   "balanced (default) | power-law:ALPHA (the kernel tables' skewed routing; the busiest EP rank)");
  cmd_->add_option("--engine", args_.engine, "whose kernels: trtllm (default) | sglang | vllm");
  cmd_->add_option("--calibration", args_.calibration, "builtin (default) | none | a profile path");
  cmd_->add_flag("--json", json_, "machine-readable output");
  cmd_->add_flag("--explain", args_.explain, "each kernel's time and what priced it, and the local experts' loads");
}

bool MoeCostCommand::parsed() const { return cmd_->parsed(); }

int MoeCostCommand::run() const {
  const nlohmann::json j = moe_cost(args_);
  if (json_) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << "moe " << args_.tokens << " tokens, " << j["local_experts"] << " local experts ("
            << j["local_token_copies"] << " token copies, at most " << j["max_expert_tokens"] << " on one) on "
            << j["gpu"].get<std::string>() << ": " << j["time_us"].get<double>() << " us\n";
  if (args_.explain)
    for (const auto& p : j["explain"]["ops"])
      std::cout << "  " << p["op"].get<std::string>() << "  " << p["us"].get<double>() << " us ("
                << p["priced_by"].get<std::string>() << ")\n";
  return 0;
}

}  // namespace moesim
