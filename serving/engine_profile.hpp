#pragma once
// What a real serving engine spends per step outside the model's kernels, and the batching
// defaults it ships with (`serving.engine: vllm | sglang | trtllm | none`). Each part is a
// number a cost model prices, never a decision: the host time of a step (scheduling, input
// preparation, sampling and detokenisation) as a function of the batch; whether decode steps
// replay a captured CUDA graph (padded to the next captured batch size) or launch kernels
// eagerly; and whether the host work of the next step overlaps the current one on the GPU.
// Presets cite where each default comes from (serving/engine_profile.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "core/registry.hpp"

namespace moesim {

/// One engine's step costs and defaults. Times in microseconds.
struct EngineProfile {
  std::string name = "none";
  /// Host time of one step: host_step_us + host_per_seq_us × sequences + host_per_token_us ×
  /// new tokens, of the busiest attention rank (each rank's scheduler runs in its own process).
  double host_step_us = 0.0;
  double host_per_seq_us = 0.0;
  double host_per_token_us = 0.0;
  /// Host time of every step that the overlap scheduler does not hide, before the step's kernels
  /// whether or not host_overlap is on (fitted where no source publishes it).
  double host_serial_us = 0.0;
  /// Host time to issue one layer's kernels in a step that runs eagerly (no CUDA graph): the
  /// framework's per-layer work (Python modules, PyTorch dispatch, launches) on each rank. Where
  /// kernels are shorter than their issue the GPU waits on the host, so an eager step pays
  /// layers x eager_layer_us + MoE layers x eager_moe_layer_us before its kernels (the regime of
  /// short kernels: with long ones the issue would hide behind them, and this overstates). Prefill
  /// and mixed steps run eagerly in every engine here; graph replays pay graph_launch_us instead.
  /// The overlap scheduler (host_overlap) hides the next step's scheduling, not this issue.
  double eager_layer_us = 0.0;
  double eager_moe_layer_us = 0.0;
  /// The host work of step n+1 runs while step n is on the GPU (SGLang's overlap scheduler):
  /// a step lasts max(GPU time, host time) instead of their sum.
  bool host_overlap = false;
  /// Decode-only steps whose batch is at most the largest captured size replay a CUDA graph:
  /// the batch is padded to the next captured size, the step pays one graph launch, and each
  /// kernel inside pays graph_kernel_us instead of the GPU's eager kernel_launch_us.
  bool cuda_graphs = false;
  std::vector<std::int64_t> graph_batch_sizes;  ///< ascending, per attention rank
  /// A decode batch between two captured sizes is padded up to the next one (vLLM, SGLang,
  /// TensorRT-LLM with enable_padding); false: only a batch of exactly a captured size replays a
  /// graph, any other runs eagerly (TensorRT-LLM's default, CudaGraphConfig.enable_padding False).
  bool graph_padding = true;
  double graph_launch_us = 0.0;
  double graph_kernel_us = 0.0;
  /// Scheduler defaults (serving: keys left out take these).
  std::int64_t max_num_seqs = 256;
  std::int64_t max_batched_tokens = 8192;
  bool chunked_prefill = true;
  std::string admission = "on-demand";  ///< on-demand | reserve-full
  std::string step_mix = "mixed";       ///< mixed | prefill-first
  double gpu_memory_utilization = 0.9;
  std::optional<double> kv_cache_free_memory_fraction;
  std::string source;  ///< where the defaults come from (engine, version, files)
  /// Whose kernels price the GEMMs and attention and whose custom all-reduce runs inside a
  /// node (hardware.calibration's per-engine fits): trtllm, sglang or vllm; empty: the datasheet
  /// model and NCCL.
  std::string kernels;

  bool active() const { return name != "none"; }
  /// The captured size a decode batch of `batch` sequences is padded to; 0 when it runs eagerly.
  std::int64_t graph_size_for(std::int64_t batch) const;
  /// Host time of a step whose busiest rank has `seqs` sequences and `tokens` new tokens.
  double host_us(std::int64_t seqs, std::int64_t tokens) const;
  /// Host time to issue an eager step's kernels for `layers` layers of which `moe_layers` are MoE.
  double eager_dispatch_us(int layers, int moe_layers) const {
    return eager_layer_us * layers + eager_moe_layer_us * moe_layers;
  }
};

/// serving.engine presets.
Registry<EngineProfile>& engine_profiles();

/// The `serving.engine` mapping's keys (every part overridable), with the preset's defaults.
std::vector<ParamSpec> engine_profile_specs(const EngineProfile& base);
/// Applies a read ParamSet of engine_profile_specs to `e`.
void apply_engine_params(const ParamSet& p, EngineProfile& e);

}  // namespace moesim
