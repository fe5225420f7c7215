// `moesim cost dispatch|combine`: one expert-parallel dispatch or combine call priced as DeepEP's
// kernels (hardware/deepep.hpp) or as moesim's NCCL pairwise all-to-all, reported the way DeepEP's
// README tables report it: kernel time and "bottleneck bandwidth" (bytes as DeepEP's tests count them).
#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "app/cli/cli.hpp"
#include "core/diagnostics.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/collectives.hpp"
#include "hardware/deepep.hpp"

namespace moesim {

DeepEpCostCommand::DeepEpCostCommand(CLI::App& cost) {
  params_.ep = 0;  // every GPU of the (scaled) preset unless --ep says otherwise
  for (const char* name : {"dispatch", "combine"}) {
    auto* c = cost.add_subcommand(name, std::string("time and bandwidth of one expert-parallel ") + name +
                                            " (DeepEP's kernels or NCCL's all-to-all), as DeepEP's tables report them");
    c->add_option("--kernel", kernel_, "deepep-normal | deepep-ll | nccl (default deepep-normal)")
        ->check(CLI::IsMember({"deepep-normal", "deepep-ll", "nccl"}));
    c->add_option("--hardware", hardware_, "hardware preset")->required();
    c->add_option("--nodes", nodes_, "nodes of the preset (default: the preset's)")->check(CLI::PositiveNumber);
    c->add_option("--nvlink-bandwidth", nvlink_GBps_, "override the preset's NVLink GB/s per GPU per direction")
        ->check(CLI::PositiveNumber);
    c->add_option("--tokens", params_.tokens, "tokens per rank")->required()->check(CLI::NonNegativeNumber);
    c->add_option("--hidden", params_.hidden, "hidden size")->required()->check(CLI::PositiveNumber);
    c->add_option("--top-k", params_.top_k, "experts per token")->required()->check(CLI::PositiveNumber);
    c->add_option("--experts", params_.experts, "routed experts")->required()->check(CLI::PositiveNumber);
    c->add_option("--ep", params_.ep, "expert-parallel ranks, GPUs 0..ep-1 (default: every GPU)")->check(CLI::PositiveNumber);
    c->add_option("--dtype", dtype_, "dispatch dtype: fp8 (e4m3, a float scale per 128 channels) | bf16; combine is bf16")
        ->check(CLI::IsMember({"fp8", "bf16"}));
    c->add_option("--topk-groups", params_.topk_groups,
                  "nodes a token may use (DeepSeek-V3 and DeepEP's tests: min(nodes, 4)); 0: no limit")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--sms", params_.sms, "SM budget of the normal kernels (DeepEP's default 20; its tables use 24)")
        ->check(CLI::PositiveNumber);
    c->add_option("--ll-nvlink", ll_nvlink_,
                  "low-latency kernels: on = same-node peers over NVLink (PR #173, DeepEP's default at 567632d), "
                  "off = every message over RDMA (DeepEP's first release)")
        ->check(CLI::IsMember({"on", "off"}));
    c->add_option("--calibration", calibration_,
                  "builtin (default: DeepEP fitted to the measured tables of the GPU's architecture), none (the "
                  "closed form with its published constants), or a profile path");
    c->add_flag("--json", json_, "machine-readable output");
    cmds_.push_back(c);
  }
}

bool DeepEpCostCommand::parsed() const {
  for (auto* c : cmds_)
    if (c->parsed()) return true;
  return false;
}

int DeepEpCostCommand::run() const {
  const bool combine = cmds_[1]->parsed();
  DeepEpParams p = params_;
  p.op = combine ? DeepEpOp::kCombine : DeepEpOp::kDispatch;
  p.fp8 = dtype_ == "fp8";
  p.ll_nvlink = ll_nvlink_ == "on";
  ClusterSpec spec = cluster_presets().get(hardware_, SourceLocation{"--hardware", 0, 0}).value;
  if (nodes_ > 0) spec.nodes = nodes_;
  apply_calibration_choice(spec, calibration_);
  if (nvlink_GBps_ > 0) spec.nvlink_bandwidth_GBps = nvlink_GBps_;
  if (spec.nodes > 1 && (spec.nics_per_node <= 0 || spec.nic_bandwidth_Gbps <= 0))
    throw InputError(SourceLocation{"--nodes", 0, 0},
                     hardware_ + " has no RDMA NICs: it cannot span nodes, and DeepEP across nodes needs them");
  const Cluster cluster = [&] {
    try {
      return Cluster(std::move(spec));
    } catch (const std::invalid_argument& e) {
      throw InputError(SourceLocation{"--hardware", 0, 0}, e.what());
    }
  }();
  if (p.ep == 0) p.ep = cluster.num_gpus();
  const char* op = combine ? "combine" : "dispatch";

  nlohmann::json j{{"op", op}, {"kernel", kernel_}, {"hardware", hardware_}, {"gpus", cluster.num_gpus()},
                   {"ep", p.ep}, {"tokens", p.tokens}, {"hidden", p.hidden}, {"top_k", p.top_k},
                   {"experts", p.experts}, {"dtype", combine ? "bf16" : dtype_}};
  if (kernel_ == "nccl") {
    // moesim's default expert all-to-all: one copy per (token, destination GPU) in the call's dtype,
    // every pair a concurrent NCCL send/recv (collectives.hpp), counted as DeepEP's normal tests count.
    p.kernel = DeepEpKernel::kNormal;
    const DeepEpRouting r = deepep_routing(cluster, p);
    const double token_bytes = deepep_message_bytes(p).counted;
    const double bytes = static_cast<double>(p.tokens) * r.ranks_per_token * token_bytes;
    const double us = ticks_to_us(collective_time(cluster, CollectiveKind::kAllToAll, p.ep, bytes));
    const double counted = static_cast<double>(p.tokens) * (r.nodes > 1 ? r.nodes_per_token : r.ranks_per_token) * token_bytes;
    j.update({{"time_us", us}, {"bytes_per_gpu", bytes}, {"counted_bytes", counted},
              {"bandwidth_GBps", us > 0 ? counted / (us * 1e3) : 0.0}, {"bandwidth_label", r.nodes > 1 ? "RDMA" : "NVLink"},
              {"ranks_per_token", r.ranks_per_token}, {"nodes_per_token", r.nodes_per_token}});
  } else {
    p.kernel = kernel_ == "deepep-ll" ? DeepEpKernel::kLowLatency : DeepEpKernel::kNormal;
    const DeepEpCost c = deepep_cost(cluster, p);
    j.update({{"time_us", c.time_us}, {"fixed_us", c.fixed_us}, {"nvlink_bytes", c.nvlink_bytes},
              {"rdma_bytes", c.rdma_bytes}, {"counted_bytes", c.counted_bytes}, {"bandwidth_GBps", c.bandwidth_GBps},
              {"bandwidth_label", c.bandwidth_label}, {"bottleneck", c.bottleneck}, {"nvlink_GBps", c.nvlink_GBps},
              {"rdma_GBps", c.rdma_GBps}, {"sm_GBps", c.sm_GBps}, {"ranks_per_token", c.routing.ranks_per_token},
              {"nodes_per_token", c.routing.nodes_per_token},
              {"priced_by", c.fitted ? "fit" : "model"}});
    if (p.kernel == DeepEpKernel::kNormal) j["sms"] = p.sms;
    else j["ll_nvlink"] = p.ll_nvlink;
  }
  if (json_) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << op << " (" << kernel_ << ") of " << p.tokens << " tokens per rank, hidden " << p.hidden << ", top-"
            << p.top_k << " of " << p.experts << " experts, EP" << p.ep << " on " << hardware_ << " ("
            << cluster.num_gpus() << " GPUs): " << j["time_us"].get<double>() << " us, "
            << j["bandwidth_GBps"].get<double>() << " GB/s (" << j["bandwidth_label"].get<std::string>() << ")\n"
            << "  destinations per token: " << j["ranks_per_token"].get<double>() << " GPUs, "
            << j["nodes_per_token"].get<double>() << " nodes\n";
  if (kernel_ != "nccl")
    std::cout << "  per GPU: " << j["nvlink_bytes"].get<double>() << " B over NVLink (" << j["nvlink_GBps"].get<double>()
              << " GB/s), " << j["rdma_bytes"].get<double>() << " B over RDMA (" << j["rdma_GBps"].get<double>()
              << " GB/s), latency floor " << j["fixed_us"].get<double>() << " us; bound by "
              << j["bottleneck"].get<std::string>() << "\n";
  return 0;
}

}  // namespace moesim
