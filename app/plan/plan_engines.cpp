// `moesim plan`'s DIR/engines.txt (app/plan.hpp): a deployment as vLLM, SGLang and TensorRT-LLM
// launch commands. Each flag is the engine's documented name (sources cited per engine below);
// where an engine has no equivalent of a setting, a note says so instead of a guess.
#include <sstream>

#include "app/plan/plan.hpp"
#include "app/sweep/sweep.hpp"

namespace moesim {
namespace {

/// EPLB's redundant replicas as moesim's eplb resolves them by default (policies/eplb.cpp): at
/// least one per GPU, rounded up so that every GPU holds the same number of slots.
int redundant_experts(int experts, int gpus) { return (experts + gpus + gpus - 1) / gpus * gpus - experts; }

struct Pool {
  const char* role;  ///< "" colocated, "prefill" or "decode"
  PlanLayout layout;
};

// vLLM (docs/serving/data_parallel_deployment.md and expert_parallel_deployment.md; vllm/engine/
// arg_utils.py, where --num-redundant-experts is deprecated for --eplb-config): --data-parallel-size ranks each run attention with --tensor-parallel-size GPUs;
// --enable-expert-parallel spreads the experts over all TP x DP GPUs, else the MoE layers are
// tensor-parallel over all of them.
void vllm(std::ostream& os, const PlanCandidate& c, const Pool& p, const std::string& model, int experts) {
  const PlanLayout& l = p.layout;
  os << "vllm serve " << model << " --tensor-parallel-size " << l.tensor_parallel;
  if (l.data_parallel > 1 && l.expert_parallel) os << " --data-parallel-size " << l.data_parallel;
  if (l.expert_parallel && l.gpus() > 1) os << " --enable-expert-parallel";
  if (c.policy == "eplb" && l.expert_parallel && l.gpus() > 1)
    os << " --enable-eplb --eplb-config '{\"num_redundant_experts\": " << redundant_experts(experts, l.gpus()) << "}'";
  os << " --max-num-seqs " << c.max_num_seqs << " --max-num-batched-tokens " << c.max_batched_tokens;
  if (*p.role) os << " --kv-transfer-config '{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}'";
  os << "\n";
  if (l.data_parallel > 1 && !l.expert_parallel)
    os << "#   vLLM's MoE layers are tensor-parallel over all DP x TP GPUs, not inside each attention group: run "
       << l.data_parallel << " such instances instead, each --tensor-parallel-size " << l.tensor_parallel << "\n";
  if (c.two_batch_overlap) os << "#   two-batch overlap: no vLLM flag confirmed in its documented arguments; left out\n";
  if (c.policy != "static-ep" && c.policy != "eplb" && l.expert_parallel)
    os << "#   vLLM has no equivalent of moesim's '" << c.policy << "' policy: static placement shown\n";
}

// SGLang (docs/advanced_features/server_arguments.md; python/sglang/srt/server_args.py and
// layers/dp_attention.py).
void sglang(std::ostream& os, const PlanCandidate& c, const Pool& p, const std::string& model, int experts) {
  const PlanLayout& l = p.layout;
  // With DP attention --tp counts the server's GPUs (attention groups of tp/dp, dp_attention.py);
  // without it --dp runs replicas of --tp GPUs each.
  const bool dp_attention = l.data_parallel > 1 && l.expert_parallel;
  os << "python -m sglang.launch_server --model-path " << model << " --tp " << (dp_attention ? l.gpus() : l.tensor_parallel);
  if (l.data_parallel > 1) os << " --dp " << l.data_parallel;
  if (dp_attention) os << " --enable-dp-attention";
  if (l.expert_parallel && l.gpus() > 1) os << " --ep-size " << l.gpus();
  if (c.policy == "eplb" && l.expert_parallel && l.gpus() > 1)
    os << " --enable-eplb --ep-num-redundant-experts " << redundant_experts(experts, l.gpus());
  os << " --max-running-requests " << c.max_num_seqs * l.data_parallel << " --chunked-prefill-size "
     << c.max_batched_tokens;
  if (c.two_batch_overlap) os << " --enable-two-batch-overlap";
  if (*p.role) os << " --disaggregation-mode " << p.role;
  os << "\n";
  if (c.policy != "static-ep" && c.policy != "eplb" && l.expert_parallel)
    os << "#   SGLang has no equivalent of moesim's '" << c.policy << "' policy: static placement shown\n";
}

// TensorRT-LLM (tensorrt_llm/commands/serve.py, llmapi/llm_args.py, examples/disaggregated):
// --tp_size counts every GPU; enable_attention_dp runs attention data-parallel over all of them;
// --ep_size is the MoE expert-parallel size (moe_expert_parallel_size); moe_config.load_balancer.
// num_slots is the online EP load balancer's expert slots.
void trtllm(std::ostream& os, const PlanCandidate& c, const Pool& p, const std::string& model, int experts) {
  const PlanLayout& l = p.layout;
  const bool adp = l.data_parallel > 1 && l.expert_parallel;
  os << "trtllm-serve " << model << " --tp_size " << (adp ? l.gpus() : l.tensor_parallel) << " --ep_size "
     << (l.expert_parallel ? (adp ? l.gpus() : l.tensor_parallel) : 1) << " --max_batch_size " << c.max_num_seqs
     << " --max_num_tokens " << c.max_batched_tokens;
  const bool eplb = c.policy == "eplb" && l.expert_parallel && l.gpus() > 1;
  if (adp || eplb) os << " --extra_llm_api_options extra.yaml";
  os << "\n";
  if (adp || eplb) {
    os << "#   extra.yaml:";
    if (adp) os << " enable_attention_dp: true";
    if (eplb)
      os << (adp ? "," : "") << " moe_config: {load_balancer: {num_slots: "
         << experts + redundant_experts(experts, l.gpus()) << "}}";
    os << "\n";
  }
  if (adp && l.tensor_parallel > 1)
    os << "#   TensorRT-LLM's attention DP runs attention on one GPU per rank: it has no attention groups of "
       << l.tensor_parallel << " GPUs beside data parallelism\n";
  if (l.data_parallel > 1 && !l.expert_parallel)
    os << "#   run " << l.data_parallel << " such servers (tensor-parallel MoE inside each group)\n";
  if (c.two_batch_overlap)
    os << "#   TensorRT-LLM has no flag for two-batch overlap in its PyTorch backend's serving path\n";
  if (*p.role)
    os << "#   the " << p.role << " workers of `trtllm-serve disaggregated -c disagg.yaml` ("
       << (std::string(p.role) == "prefill" ? "context_servers" : "generation_servers")
       << "), each with cache_transceiver_config in its extra options\n";
  if (c.policy != "static-ep" && c.policy != "eplb" && l.expert_parallel)
    os << "#   TensorRT-LLM has no equivalent of moesim's '" << c.policy << "' policy: static placement shown\n";
}

}  // namespace

std::string engine_commands(const PlanCandidate& c, const std::string& model, int experts, double load,
                            const std::string& load_key) {
  std::ostringstream os;
  os << "# moesim plan's best deployment: " << c.label() << "\n# one instance of " << c.gpus << " GPUs, capacity "
     << load_key << " = " << format_number(load) << " at the SLO\n# '" << model
     << "' is moesim's model name: give the engines your checkpoint's path or Hugging Face id\n";
  std::vector<Pool> pools;
  if (c.disaggregated)
    pools = {{"prefill", c.prefill}, {"decode", c.decode}};
  else
    pools = {{"", c.colocated}};
  const auto each = [&](const char* engine, auto emit) {
    os << "\n# " << engine << "\n";
    for (const Pool& p : pools) emit(os, c, p, model, experts);
  };
  each("vLLM", vllm);
  each("SGLang", sglang);
  each("TensorRT-LLM", trtllm);
  return os.str();
}

}  // namespace moesim
