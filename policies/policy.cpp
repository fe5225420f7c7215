#include "policies/policy.hpp"

namespace moesim {

const char* moe_all_to_all_name(MoeAllToAll a) {
  switch (a) {
    case MoeAllToAll::kNccl: return "nccl";
    case MoeAllToAll::kDeepEpNormal: return "deepep-normal";
    case MoeAllToAll::kDeepEpLowLatency: return "deepep-ll";
  }
  return "?";
}

Registry<PolicyInfo>& policies() {
  static Registry<PolicyInfo> registry("policy");
  return registry;
}

std::int64_t Policy::expert_intermediate_width(const PolicyContext& ctx) const {
  return ctx.model.expert_ffn * (ctx.model.activation == Activation::kSwiGlu ? 2 : 1);
}

ExpertPlacement ExpertPlacement::from_owner(const std::vector<int>& owner, int num_gpus) {
  ExpertPlacement p;
  p.gpus_of_expert.resize(owner.size());
  p.experts_on_gpu.resize(num_gpus);
  for (std::size_t e = 0; e < owner.size(); ++e) {
    p.gpus_of_expert[e].push_back(owner[e]);
    p.experts_on_gpu[owner[e]].push_back(static_cast<int>(e));
  }
  return p;
}

ParamSpec placement_param() {
  return ParamSpec{"placement", ParamType::kString, "contiguous", "",
                   "static expert layout: contiguous (expert e on GPU floor(e*G/E), as DeepSpeed, "
                   "FastMoE and vLLM/SGLang) or round-robin (expert e on GPU e mod G)",
                   {}, {}, {"contiguous", "round-robin"}};
}

std::vector<int> static_owner(const std::string& placement, int experts, int gpus) {
  std::vector<int> owner(experts);
  for (int e = 0; e < experts; ++e) {
    owner[e] = placement == "round-robin"
                   ? e % gpus
                   : static_cast<int>(static_cast<std::int64_t>(e) * gpus / experts);
  }
  return owner;
}

void warn_gpus_without_experts(const ParamSet& /*p*/, const ModelSpec& m, const ClusterSpec& c, PolicyCheck& found) {
  const int gpus = c.nodes * c.gpus_per_node;
  if (m.experts < gpus)
    found.warnings.push_back({"", std::to_string(gpus - m.experts) + " of the " + std::to_string(gpus) +
                                      " GPUs hold no expert (" + std::to_string(m.experts) +
                                      " experts, one copy each): they run attention only"});
}

}  // namespace moesim
