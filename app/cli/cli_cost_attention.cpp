// `moesim cost attention` and `moesim cost mla`: one attention core on one GPU, as the kernel
// tables time it (../shared/data/kernels/: TensorRT-LLM's attention and MLA ops): prefill over
// whole prompts, or decode of one token per sequence over `--seq` cached tokens. The op is the
// one serving prices (models/operators.cpp), priced by the built-in attention fit or the
// datasheet roofline.
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/cli.hpp"
#include "calibrate/attention_tables.hpp"
#include "core/diagnostics.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"

namespace moesim {
namespace {

DType checked_dtype(const std::string& s, const char* flag) {
  DType d;
  if (!parse_dtype(s, d) || (d != DType::kBf16 && d != DType::kFp16 && d != DType::kFp8))
    throw InputError(SourceLocation{flag, 0, 0}, "must be one of bf16, fp16, fp8, got '" + s + "'");
  return d;
}

void check_range(const char* flag, long long v, long long lo, long long hi) {
  if (v < lo || v > hi)
    throw InputError(SourceLocation{flag, 0, 0}, "must be a whole number in [" + std::to_string(lo) + ", " +
                                                     std::to_string(hi) + "], got " + std::to_string(v));
}

}  // namespace

nlohmann::json attention_cost(const AttentionCostArgs& a) {
  const bool decode = a.phase == "decode";
  if (!decode && a.phase != "prefill")
    throw InputError(SourceLocation{"--phase", 0, 0}, "must be prefill or decode, got '" + a.phase + "'");
  check_range("--batch", a.batch, 1, 1 << 16);
  check_range("--seq", a.seq, 1, 1 << 24);
  // A KV cache of batch x seq tokens past 2^36 positions is no GPU's (and overflows nothing).
  if (static_cast<double>(a.batch) * static_cast<double>(a.seq) > std::ldexp(1.0, 36))
    throw InputError(SourceLocation{"--seq", 0, 0}, "batch x seq must be at most 2^36 tokens");
  check_range("--heads", a.heads, 1, 1 << 12);
  // The query is a row of the attention tables: the same op the fits were fitted to.
  calibration::AttentionTableRow row;
  row.family = a.mla ? (decode ? AttentionFamily::kMlaDecode : AttentionFamily::kMlaPrefill)
                     : (decode ? AttentionFamily::kMhaDecode : AttentionFamily::kMhaPrefill);
  row.batch = a.batch;
  row.length = a.seq;
  row.heads = a.heads;
  if (!a.mla) {
    check_range("--kv-heads", a.kv_heads, 1, a.heads);
    if (a.heads % a.kv_heads != 0)
      throw InputError(SourceLocation{"--kv-heads", 0, 0}, "must divide --heads (" + std::to_string(a.heads) + ")");
    check_range("--head-dim", a.head_dim, 1, 1024);
    check_range("--window", a.window, 0, 1 << 24);
    row.kv_heads = a.kv_heads;
    row.head_dim = a.head_dim;
    row.window = a.window;
  }
  row.compute = checked_dtype(a.dtype, "--dtype");
  row.kv = checked_dtype(a.kv_dtype, "--kv-dtype");
  if (a.engine != "trtllm" && a.engine != "sglang" && a.engine != "vllm")
    throw InputError(SourceLocation{"--engine", 0, 0}, "engine '" + a.engine + "' is not one of trtllm, sglang, vllm");
  ClusterSpec spec;
  if (const auto* g = gpu_presets().find(a.gpu)) spec.gpu = g->value;
  else if (const auto* c = cluster_presets().find(a.gpu)) spec.gpu = c->value.gpu;
  else throw InputError(SourceLocation{"--gpu", 0, 0}, unknown_name_message("GPU", a.gpu, gpu_presets().names()));
  apply_calibration_choice(spec, a.calibration);
  ComputeCostModel model(spec.gpu, ComputeEfficiency{}, spec.calibration);
  model.select_kernels(a.engine);

  const Op core = calibration::attention_row_op(row);
  const AttentionKernelFit* fit = model.attention_fit(core);
  const double kernel_us = model.kernel_seconds(core) * 1e6;
  nlohmann::json j{{"op", a.mla ? "mla" : "attention"},
                   {"phase", a.phase},
                   {"gpu", spec.gpu.name},
                   {"engine", a.engine},
                   {"batch", a.batch},
                   {"seq", a.seq},
                   {"heads", a.heads},
                   {"dtype", a.dtype},
                   {"kv_dtype", a.kv_dtype},
                   {"calibration", spec.calibration ? (a.calibration.empty() ? std::string("builtin") : a.calibration) : "none"},
                   {"priced_by", fit ? "fit" : "datasheet"},
                   {"kernel_us", kernel_us},
                   {"launch_us", spec.gpu.kernel_launch_us},
                   {"time_us", kernel_us + spec.gpu.kernel_launch_us},
                   {"flops", core.flops},
                   {"bytes", core.bytes}};
  if (!a.mla) j.update({{"kv_heads", a.kv_heads}, {"head_dim", a.head_dim}, {"window", a.window}});
  if (a.explain) {
    if (fit) {
      const double physics = model.fitted_attention_seconds(*fit, core, true);
      j["explain"] = {{"source", "fit"},
                      {"model", "overhead + (compute^p + memory^p)^(1/p) + unit x sequences x heads / SMs, x residual"},
                      {"family", attention_family_name(fit->family)},
                      {"engine", fit->engine},
                      {"compute_dtype", dtype_name(fit->compute_dtype)},
                      {"kv_dtype", dtype_name(fit->kv_dtype)},
                      {"fitted_on", fit->system},
                      {"transferred", spec.gpu.name != measured_gpu_preset(fit->system)},
                      {"compute_efficiency", fit->compute_efficiency},
                      {"memory_efficiency", fit->memory_efficiency},
                      {"overhead_us", fit->overhead_us},
                      {"unit_us", fit->unit_us},
                      {"blend", fit->blend},
                      {"physics_us", physics * 1e6},
                      {"residual_factor", physics > 0 ? kernel_us * 1e-6 / physics : 1.0},
                      {"fitted_rows", fit->fitted_rows},
                      {"fitted_median_error_pct", fit->fitted_median_error}};
    } else {
      const GpuSpec& g = spec.gpu;
      j["explain"] = {{"source", "datasheet"},
                      {"model", "max(flops / (peak x attention efficiency), bytes / (HBM x memory efficiency))"},
                      {"attention_efficiency", model.efficiency().attention},
                      {"memory_efficiency", model.efficiency().memory},
                      {"compute_us", core.flops / (g.peak(core.dtype) * model.efficiency().attention) * 1e6},
                      {"memory_us", core.bytes / (g.hbm_bandwidth_Bps * model.efficiency().memory) * 1e6}};
    }
  }
  return j;
}

AttentionCostCommand::AttentionCostCommand(CLI::App& cost) {
  for (const bool mla : {false, true}) {
    AttentionCostArgs& a = mla ? mla_ : mha_;
    a.mla = mla;
    CLI::App* c = cost.add_subcommand(mla ? "mla" : "attention",
                                      mla ? "one GPU's MLA attention core (DeepSeek's dimensions), prefill or decode"
                                          : "one GPU's MHA/GQA attention core, prefill or decode");
    c->add_option("--gpu", a.gpu, "GPU preset, or a hardware preset meaning its GPU")->required();
    c->add_option("--phase", a.phase, "prefill (whole prompts of --seq tokens) | decode (one token over --seq cached)")
        ->required()
        ->check(CLI::IsMember({"prefill", "decode"}));
    c->add_option("--batch", a.batch, "sequences")->required();
    c->add_option("--seq", a.seq, "prefill: prompt tokens; decode: the KV length")->required();
    c->add_option("--heads", a.heads, "query heads on this GPU (after tensor parallelism)")->required();
    if (!mla) {
      c->add_option("--kv-heads", a.kv_heads, "KV heads on this GPU (divides --heads)")->required();
      c->add_option("--head-dim", a.head_dim, "head dimension")->required();
      c->add_option("--window", a.window, "sliding window in tokens (default 0: full attention)");
      c->add_option("--dtype", a.dtype, "the math's type: bf16 (default) | fp16 | fp8");
    }
    c->add_option("--kv-dtype", a.kv_dtype, "the KV cache's type: bf16 (default) | fp16 | fp8");
    c->add_option("--engine", a.engine, "whose kernels: trtllm (default) | sglang | vllm (all read TensorRT-LLM's tables)");
    c->add_option("--calibration", a.calibration, "builtin (default) | none | a profile path");
    c->add_flag("--json", json_, "machine-readable output");
    c->add_flag("--explain", a.explain, "what priced it: the fitted model and its parameters, or the datasheet");
    (mla ? mla_cmd_ : mha_cmd_) = c;
  }
}

bool AttentionCostCommand::parsed() const { return mha_cmd_->parsed() || mla_cmd_->parsed(); }

int AttentionCostCommand::run() const {
  const AttentionCostArgs& a = mla_cmd_->parsed() ? mla_ : mha_;
  const nlohmann::json j = attention_cost(a);
  if (json_) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << j["op"].get<std::string>() << " " << a.phase << " batch=" << a.batch << " seq=" << a.seq
            << " heads=" << a.heads << " on " << j["gpu"].get<std::string>() << ": " << j["kernel_us"].get<double>()
            << " us kernel, " << j["time_us"].get<double>() << " us with launch (" << j["priced_by"].get<std::string>()
            << ")\n";
  if (a.explain) {
    const auto& e = j["explain"];
    if (e["source"] == "fit") {
      std::cout << "  priced by   the " << e["engine"].get<std::string>() << " " << e["family"].get<std::string>() << " fit ("
                << e["compute_dtype"].get<std::string>() << " math, " << e["kv_dtype"].get<std::string>()
                << " KV; fitted on " << e["fitted_on"].get<std::string>()
                << (e["transferred"].get<bool>() ? ", transferred to this GPU" : "") << "; " << e["fitted_rows"]
                << " rows, median error " << e["fitted_median_error_pct"].get<double>() << "%)\n"
                << "  model       " << e["model"].get<std::string>() << "\n"
                << "  parameters  compute " << e["compute_efficiency"].get<double>() << " of peak, memory "
                << e["memory_efficiency"].get<double>() << " of HBM, overhead " << e["overhead_us"].get<double>()
                << " us, unit " << e["unit_us"].get<double>() << " us, p " << e["blend"].get<double>() << "\n"
                << "  physics     " << e["physics_us"].get<double>() << " us, x " << e["residual_factor"].get<double>()
                << " from the measured shapes around this one\n";
    } else {
      std::cout << "  priced by   the datasheet roofline: " << e["model"].get<std::string>() << "\n  compute     "
                << e["compute_us"].get<double>() << " us\n  memory      " << e["memory_us"].get<double>() << " us\n";
    }
  }
  return 0;
}

}  // namespace moesim
