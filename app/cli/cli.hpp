#pragma once
// The moesim command line: run, validate, sweep, plan, guideline, list, cost, calibrate. Exit codes: 0 success, 2 bad input
// (every problem printed as file:line:col: error: ...), 1 internal error.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cluster.hpp"
#include "hardware/deepep.hpp"
#include "app/plan/plan.hpp"
#include "app/run/staged_output.hpp"

namespace CLI {
class App;
class Validator;
}

namespace moesim {

int run_cli(int argc, char** argv);

/// Rejects NaN, infinities (which CLI11's range checks let through) and anything but a decimal
/// number (std::stod and CLI11 read 0x10 as 16).
extern const CLI::Validator finite_number;

/// Subcommands implemented in their own files. `calibration` is a profile path or empty.
int cli_list(const char* what);
/// `moesim list --markdown` (the whole reference; `what` must be empty) and `moesim schema`.
int cli_list_markdown(const char* what);
int cli_schema();
/// `calibration`: "builtin" or "" (the GPU architecture's kernel fits), "none", or a profile path;
/// `engine`: whose kernels the fits are read for.
int cli_cost_gemm(const std::string& gpu, long long m, long long n, long long k, const std::string& dtype,
                  const std::string& calibration, bool json, bool explain = false, const std::string& engine = "trtllm");
/// The cost queries behind `moesim cost gemm|allreduce|allgather|alltoall|sendrecv --json` (and
/// moesim.cost in Python): what the CLI prints with --json, as JSON; InputError on bad arguments.
nlohmann::json gemm_cost(const std::string& gpu, long long m, long long n, long long k, const std::string& dtype,
                         const std::string& calibration, bool explain, const std::string& engine = "trtllm");
/// `impl` "custom" prices an all-reduce by `engine`'s custom kernel where the calibration has it.
nlohmann::json collective_cost(const std::string& kind, const std::string& hardware, int nodes, int gpus, double bytes,
                               const std::string& calibration, const std::string& network_model, bool explain,
                               const std::string& impl = "nccl", const std::string& engine = "trtllm");
/// `network_model` names the backend timing the collective's flows ("flow" or "analytic"); `nodes`
/// > 0 scales the preset to that many nodes.
int cli_cost_collective(const std::string& kind, const std::string& hardware, int nodes, int gpus, double bytes,
                        const std::string& calibration, const std::string& network_model, bool json,
                        bool explain = false, const std::string& impl = "nccl", const std::string& engine = "trtllm");
/// Kernel tables among `files` (gemm.csv, ...) are fitted to kernel fits; `kernel_report`, when not
/// empty, receives the fits' held-out scores as JSON.
int cli_calibrate_fit(const std::vector<std::string>& files, const std::string& base, const std::string& out,
                      double holdout, const std::string& kernel_report = "");
int cli_calibrate_report(const std::string& profile, const std::vector<std::string>& files, bool json);
/// A hardware preset with a profile applied (none when `profile_path` is empty).
ClusterSpec calibrated_preset(const std::string& preset, const std::string& profile_path);


/// `moesim sweep` (cli_sweep.cpp): registers its options on construction; `run` executes it once
/// the command line chose it.
class SweepCommand {
 public:
  explicit SweepCommand(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* cmd_ = nullptr;
  CLI::App* merge_ = nullptr;
  std::string file_, out_, shard_;
  std::vector<std::string> grids_, zips_, sets_, merge_dirs_;
  std::string merge_out_;
  unsigned jobs_ = 0;
};

/// `moesim plan` (cli_plan.cpp): the deployment search; registers its options on construction.
class PlanCommand {
 public:
  explicit PlanCommand(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  PlanSpec spec_from_options() const;
  /// Writes plan.csv, best.yaml, engines.txt and plan.txt into `out` and prints the table.
  static int write_plan(const PlanSpec& spec, const PlanOutcome& o, const std::string& out);
  CLI::App* cmd_ = nullptr;
  CLI::App* merge_ = nullptr;
  std::vector<std::string> merge_dirs_;
  std::string merge_out_, shard_;
  unsigned merge_jobs_ = 0;
  std::string file_, out_, objective_ = "goodput-per-gpu", slo_, policies_, seqs_, tokens_, gpus_;
  std::string disaggregation_ = "auto", tbo_ = "false";
  std::vector<std::string> sets_;
  int max_gpus_ = 0;
  double percentile_ = 90.0, cost_ = 0.0, span_ = 0.5;
  int sampling_ = 0;
  std::size_t finalists_ = 10;
  unsigned jobs_ = 0;
  bool quiet_ = false;
};

/// The arguments of `moesim cost moe` (and moesim.cost.moe in Python).
struct MoeCostArgs {
  std::string gpu, dtype = "bf16", distribution = "balanced", engine = "trtllm", calibration;
  long long tokens = 0, hidden = 0, inter = 0, top_k = 0, experts = 0, tp = 1, ep = 1;
  bool explain = false;
};
/// One GPU's fused MoE layer; InputError on bad arguments (cli_cost_moe.cpp).
nlohmann::json moe_cost(const MoeCostArgs& args);
/// The token copies each local expert of the timed EP rank gets: balanced, or (alpha > 0) the
/// kernel tables' power-law routing at its expected quantiles, the busiest rank.
std::vector<std::int64_t> moe_local_loads(std::int64_t tokens, int top_k, int experts, int ep, double alpha);

/// `moesim cost moe` (cli_cost_moe.cpp): registers itself under `cost` on construction.
class MoeCostCommand {
 public:
  explicit MoeCostCommand(CLI::App& cost);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* cmd_ = nullptr;
  MoeCostArgs args_;
  bool json_ = false;
};

/// The arguments of `moesim cost attention|mla` (and moesim.cost.attention / .mla in Python).
struct AttentionCostArgs {
  bool mla = false;
  std::string gpu, phase, dtype = "bf16", kv_dtype = "bf16", engine = "trtllm", calibration;
  long long batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  bool explain = false;
};
/// One GPU's attention core; InputError on bad arguments (cli_cost_attention.cpp).
nlohmann::json attention_cost(const AttentionCostArgs& args);

/// `moesim cost attention|mla` (cli_cost_attention.cpp): registers both under `cost`.
class AttentionCostCommand {
 public:
  explicit AttentionCostCommand(CLI::App& cost);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* mha_cmd_ = nullptr;
  CLI::App* mla_cmd_ = nullptr;
  AttentionCostArgs mha_, mla_;
  bool json_ = false;
};

/// `moesim cost dispatch|combine` (cli_cost_deepep.cpp): DeepEP's kernels or NCCL's all-to-all for one
/// expert-parallel call; registers its options under `cost` on construction.
class DeepEpCostCommand {
 public:
  explicit DeepEpCostCommand(CLI::App& cost);
  bool parsed() const;
  int run() const;

 private:
  std::vector<CLI::App*> cmds_;  ///< dispatch, combine
  DeepEpParams params_;
  std::string kernel_ = "deepep-normal", hardware_, dtype_ = "fp8", ll_nvlink_ = "on", calibration_;
  int nodes_ = 0;
  double nvlink_GBps_ = 0;
  bool json_ = false;
};

/// `moesim list` and `moesim schema` (cli_list.cpp): registers both on construction.
class ListCommand {
 public:
  explicit ListCommand(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* list_ = nullptr;
  CLI::App* schema_ = nullptr;
  std::string what_;
  bool markdown_ = false;
};

/// `moesim cost gemm|allreduce|allgather|alltoall|sendrecv|dispatch|combine` (cli_cost.cpp, and
/// cli_cost_deepep.cpp for DeepEP's two): registers them on construction.
class CostCommand {
 public:
  explicit CostCommand(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* cost_ = nullptr;
  CLI::App* gemm_ = nullptr;
  std::vector<CLI::App*> collectives_;
  std::unique_ptr<DeepEpCostCommand> deepep_;
  std::unique_ptr<MoeCostCommand> moe_;
  std::unique_ptr<AttentionCostCommand> attention_;
  std::string gpu_, dtype_ = "bf16", hardware_, calibration_, network_model_ = "flow", engine_ = "trtllm", impl_ = "nccl";
  long long m_ = 0, n_ = 0, k_ = 0;
  int gpus_ = 0, nodes_ = 0;
  double bytes_ = 0;
  bool json_ = false, explain_ = false;
};

/// `moesim calibrate fit|report` (cli_calibrate.cpp): registers both on construction.
class CalibrateCommand {
 public:
  explicit CalibrateCommand(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* fit_ = nullptr;
  CLI::App* report_ = nullptr;
  std::vector<std::string> measurements_;
  std::string base_, profile_out_, profile_in_, kernel_report_;
  double holdout_ = 0.2;
  bool json_ = false;
};

/// `moesim guideline` (cli_guideline.cpp, guideline.hpp): registers its options on construction;
/// `run` executes it once the command line chose it.
class GuidelineCommand {
 public:
  explicit GuidelineCommand(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  CLI::App* cmd_ = nullptr;
  std::string model_, hardware_;
  std::string skewness_ = "1.0:4.0:0.2", bandwidth_ = "32,64,300,600", accuracies_ = "0.5:1.0:0.05";
  std::int64_t batch_size_ = 1, seq_len_ = 512, batches_ = 4, warmup_batches_ = 1;
  std::uint64_t seed_ = 1;
  std::vector<std::string> sets_;
  std::string out_, curves_;
  std::string assumptions_ = "timed", without_;
  unsigned jobs_ = 0;
  bool quiet_ = false;
};

}  // namespace moesim
