// `amoe` in the policy registry: the options of AMoE's attention–expert split
// (serving/amoe/layer_queues.hpp) and its capabilities. It is not stepped, so it has no Policy
// object: the serving engine runs it in layer-queue mode (app/run/layer_queue_deployment.hpp reads
// the options), and the scenario loader refuses it on prefill workloads, at the entry.
#include "policies/policy.hpp"
#include "serving/amoe/layer_scheduler.hpp"

namespace moesim {
namespace {

const bool registered = policies().add(
    "amoe",
    "AMoE: asynchronous expert parallelism (serving only): attention and expert GPUs apart, a μ-queue per layer, "
    "each GPU runs whichever layer its scheduler picks, point-to-point transfers, no barrier",
    PolicyInfo{{ParamSpec{"attention_gpus", ParamType::kInt, "0", "GPUs",
                          "GPUs [0, n) run every block's attention data-parallel, the rest host the experts (§3.3); "
                          "0 = deployment.attention_gpus when the deployment gives the split, else half of the cluster",
                          0.0, 1e6, {}},
                ParamSpec{"scheduler", ParamType::kString, "defrag", "",
                          "which μ-queue an idle GPU drains (§3.4): mtfs = most tokens, flfs = earliest block with "
                          "tokens, defrag = Algorithm 1 (tokens + lookahead over the next K blocks decayed by δ)",
                          {}, {}, {"mtfs", "flfs", "defrag"}},
                ParamSpec{"lookahead_blocks", ParamType::kInt, "2", "blocks",
                          "defrag's K: blocks ahead whose queued tokens add to a queue's score. Chosen (the paper "
                          "gives no value)",
                          0.0, 4096.0, {}},
                ParamSpec{"decay", ParamType::kFloat, "0.5", "",
                          "defrag's δ: weight of the k-th block ahead is δ^k. Chosen (the paper gives no value)",
                          0.0, 1.0, {}},
                ParamSpec{"max_batch_tokens", ParamType::kInt, "8192", "tokens",
                          "most tokens one execution drains from a queue (whole requests; at least one)", 1.0, 1e7, {}},
                ParamSpec{"micro_batches", ParamType::kInt, "0", "",
                          "0: AMoE's asynchronous execution. n >= 1: synchronous ping-pong over the same "
                          "attention/expert split instead (MegaScale-Infer): each iteration's requests form n "
                          "micro-batches that cross every block behind a barrier, the pools overlapping across "
                          "micro-batches; `scheduler` is then unused",
                          0.0, 64.0, {}},
                ParamSpec{"attention_placement", ParamType::kString, "most-free-kv", "",
                          "the attention GPU a new request is bound to: most-free-kv (AMoE's load balancer, §3.1) "
                          "or fewest-requests; ties to the lowest GPU",
                          {}, {}, {"most-free-kv", "fewest-requests"}},
                ParamSpec{"schedule_us", ParamType::kFloat, "10", "us",
                          "host time of one scheduling decision before each execution. Chosen: AMoE's runtime is "
                          "not profiled in the paper",
                          0.0, 1.0e6, {}}},
               nullptr,
               {},
               PolicyCapabilities{.expert_parallel = false, .prefill = false, .predictors = false, .stepped = false,
                                  .own_layout = "attention_gpus"}});

}  // namespace
}  // namespace moesim
