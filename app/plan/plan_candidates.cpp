// `moesim plan`'s search space (app/plan.hpp): the candidates, their labels, and the options that
// name objectives and SLOs.
#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "app/plan/plan.hpp"
#include "app/sweep/sweep.hpp"
#include "core/diagnostics.hpp"

namespace moesim {
namespace {

const std::vector<std::pair<std::string, PlanObjective>>& objectives() {
  static const std::vector<std::pair<std::string, PlanObjective>> v{
      {"goodput-per-gpu", PlanObjective::kGoodputPerGpu},
      {"throughput-per-gpu", PlanObjective::kThroughputPerGpu},
      {"tokens-per-user", PlanObjective::kTokensPerUser},
      {"cost", PlanObjective::kCost}};
  return v;
}

std::string layout_text(const PlanLayout& l) {
  std::string s = "TP" + std::to_string(l.tensor_parallel);
  if (l.data_parallel > 1) s += "xDP" + std::to_string(l.data_parallel);
  s += l.expert_parallel ? " EP" : " TP-MoE";
  return s;
}

// Attention group sizes for a pool of `gpus`: divisors of the pool that divide a node and the
// heads (an attention group's all-reduces stay inside one node; every GPU runs the same heads).
std::vector<int> group_sizes(int gpus, int gpus_per_node, int heads) {
  std::vector<int> out;
  for (int tp = 1; tp <= gpus; ++tp)
    if (gpus % tp == 0 && gpus_per_node % tp == 0 && (heads <= 0 || heads % tp == 0)) out.push_back(tp);
  return out;
}

// The layouts a pool of `gpus` is tried with. Colocated: every group size, experts
// expert-parallel over the instance or tensor-parallel inside each group (on one GPU the two are
// the same: one layout). A disaggregated pool: attention data-parallel with expert parallelism
// (DeepSeek's and SGLang's large-scale decode), and the largest group size with expert parallelism
// (vLLM's and TensorRT-LLM's TP + EP).
std::vector<PlanLayout> pool_layouts(int gpus, int gpus_per_node, int heads, bool pool) {
  const std::vector<int> sizes = group_sizes(gpus, gpus_per_node, heads);
  std::vector<PlanLayout> out;
  if (pool) {
    out.push_back({1, gpus, true});
    if (sizes.back() > 1) out.push_back({sizes.back(), gpus / sizes.back(), true});
    return out;
  }
  for (int tp : sizes) {
    out.push_back({tp, gpus / tp, true});
    if (gpus > 1) out.push_back({tp, gpus / tp, false});
  }
  return out;
}

}  // namespace

std::string PlanCandidate::label() const {
  if (scenario) return "scenario";
  std::ostringstream os;
  os << gpus << " GPU ";
  if (disaggregated)
    os << prefill.gpus() << "P(" << layout_text(prefill) << ") " << decode.gpus() << "D(" << layout_text(decode) << ")";
  else
    os << layout_text(colocated);
  if (disaggregated || colocated.expert_parallel) os << " " << policy;
  os << " seqs=" << max_num_seqs << " tokens=" << max_batched_tokens;
  if (two_batch_overlap) os << " tbo";
  return os.str();
}

PlanObjective parse_plan_objective(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& [n, o] : objectives()) {
    if (n == name) return o;
    names.push_back(n);
  }
  throw InputError(SourceLocation{"--objective " + name, 0, 0}, unknown_name_message("objective", name, names));
}

const char* plan_objective_name(PlanObjective o) {
  for (const auto& [n, v] : objectives())
    if (v == o) return n.c_str();
  throw std::logic_error("plan_objective_name: unknown objective");
}

void parse_plan_slo(const std::string& text, PlanSpec& spec) {
  const SourceLocation where{"--slo " + text, 0, 0};
  std::istringstream in(text);
  std::string part;
  bool any = false;
  while (std::getline(in, part, ',')) {
    const auto eq = part.find('=');
    const std::string key = part.substr(0, eq);
    if (eq == std::string::npos || (key != "ttft_ms" && key != "tpot_ms"))
      throw InputError(where, "expected ttft_ms=MS,tpot_ms=MS (either or both), got '" + part + "'");
    double v = 0.0;
    try {
      std::size_t used = 0;
      v = std::stod(part.substr(eq + 1), &used);
      if (used != part.size() - eq - 1) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw InputError(where, "'" + key + "' must be a number of milliseconds, got '" + part.substr(eq + 1) + "'");
    }
    if (!(v > 0.0) || v > 1e9) throw InputError(where, "'" + key + "' must be in (0, 1e9] ms, got " + format_number(v));
    (key == "ttft_ms" ? spec.slo_ttft_ms : spec.slo_tpot_ms) = v;
    any = true;
  }
  if (!any) throw InputError(where, "expected ttft_ms=MS,tpot_ms=MS (either or both)");
}

std::vector<PlanCandidate> plan_candidates(const PlanSpec& spec, int max_gpus, int gpus_per_node, int heads,
                                           std::int64_t max_num_seqs, std::int64_t max_batched_tokens) {
  std::vector<int> sizes = spec.gpus_per_instance;
  if (sizes.empty()) {
    for (int g = 1; g <= std::min(max_gpus, gpus_per_node); g *= 2)
      if (gpus_per_node % g == 0) sizes.push_back(g);
    for (long long g = 2LL * gpus_per_node; g <= max_gpus; g *= 2) sizes.push_back(static_cast<int>(g));
    if (max_gpus > gpus_per_node && max_gpus % gpus_per_node == 0 &&
        std::find(sizes.begin(), sizes.end(), max_gpus) == sizes.end())
      sizes.push_back(max_gpus);
  }
  const std::vector<std::int64_t> seqs = spec.max_num_seqs.empty() ? std::vector<std::int64_t>{max_num_seqs}
                                                                   : spec.max_num_seqs;
  const std::vector<std::int64_t> tokens = spec.max_batched_tokens.empty()
                                               ? std::vector<std::int64_t>{max_batched_tokens}
                                               : spec.max_batched_tokens;
  std::vector<PlanCandidate> out;
  PlanCandidate scenario;
  scenario.scenario = true;
  out.push_back(scenario);
  // Every combination of the serving knobs for one deployment.
  const auto add = [&](PlanCandidate c, const std::vector<std::string>& policies) {
    for (const std::string& policy : policies)
      for (std::int64_t s : seqs)
        for (std::int64_t t : tokens)
          for (bool tbo : spec.two_batch_overlap) {
            c.policy = policy;
            c.max_num_seqs = s;
            c.max_batched_tokens = t;
            c.two_batch_overlap = tbo;
            c.index = out.size();
            out.push_back(c);
          }
  };
  // Expert placement matters only when experts are spread over several GPUs.
  const auto policies_for = [&](bool ep, int gpus) {
    if (!ep) return std::vector<std::string>{"tp-experts"};
    return gpus > 1 ? spec.policies : std::vector<std::string>{"static-ep"};
  };
  for (int g : sizes) {
    if (spec.disaggregation != "only")
      for (const PlanLayout& l : pool_layouts(g, gpus_per_node, heads, false)) {
        PlanCandidate c;
        c.gpus = g;
        c.colocated = l;
        add(c, policies_for(l.expert_parallel, g));
      }
    if (spec.disaggregation == "off" || g < 2) continue;
    // xPyD splits: a quarter, a half or three quarters of the instance prefill.
    std::vector<int> prefill_sizes;
    for (int num : {1, 2, 3})
      if ((g * num) % 4 == 0 || (num == 2 && g % 2 == 0)) prefill_sizes.push_back(g * num / 4);
    prefill_sizes.erase(std::unique(prefill_sizes.begin(), prefill_sizes.end()), prefill_sizes.end());
    for (int p : prefill_sizes) {
      const int d = g - p;
      if (p < 1 || d < 1) continue;
      for (const PlanLayout& pl : pool_layouts(p, gpus_per_node, heads, true))
        for (const PlanLayout& dl : pool_layouts(d, gpus_per_node, heads, true)) {
          PlanCandidate c;
          c.gpus = g;
          c.disaggregated = true;
          c.prefill = pl;
          c.decode = dl;
          add(c, policies_for(true, std::min(p, d) > 1 ? g : 1));
        }
    }
  }
  return out;
}

}  // namespace moesim
