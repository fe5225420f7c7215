#pragma once
// An attention kernel family's cost, fitted to measured kernel tables (issue 47): the roofline of
// the fused attention core (flash attention in prefill, paged attention in decode) with its
// efficiencies measured, a per-work-item cost, and a table of what the physics misses.
//
//   t = overhead + (C^p + M^p)^(1/p) + U,  then × exp(residual(log sequences, log length, log group))
//   C = flops / (peak · η)          the score and value products (models/operators.cpp's FLOPs)
//   M = bytes / (hbm_bw · β)        Q and O once, K and V once per sequence (its HBM bytes)
//   U = unit · sequences · heads / SMs   each (sequence, head) work item's set-up (rope, the KV
//                                   cache write, softmax state), shared over the SMs
//   group: query heads per KV stream for MHA/GQA (the decode kernels switch tiling with it: one
//          query row per KV head runs on CUDA cores, 64 share tensor-core tiles); the heads for
//          MLA (one latent stream in decode, per-head K/V in decompressed prefill)
//
// The physical parameters transfer to a GPU without tables at its own peak, bandwidth and SM
// count (docs/guide.md, "Built-in kernel profiles"); the residual is the kernel library's.
#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

#include "hardware/gemm_kernel_fit.hpp"
#include "sim/work.hpp"

namespace moesim {

/// Which attention kernel: MHA/GQA/MQA or MLA, decode (a few query tokens per sequence over a
/// cached KV) or prefill (a whole prompt), as TensorRT-LLM's tables time them.
enum class AttentionFamily { kMhaDecode = 0, kMhaPrefill = 1, kMlaDecode = 2, kMlaPrefill = 3 };
inline constexpr int kNumAttentionFamilies = 4;
/// "mha-decode", "mha-prefill", "mla-decode", "mla-prefill".
const char* attention_family_name(AttentionFamily f);
bool parse_attention_family(const std::string& s, AttentionFamily& out);
/// Query tokens per sequence up to which an attention core runs the decode kernels (speculative
/// decoding's draft tokens run TensorRT-LLM's generation kernels too).
inline constexpr std::int64_t kDecodeMaxQueryTokens = 16;
/// The family of an attention core op: its form, and for MHA/GQA decode when no sequence brings
/// more than kDecodeMaxQueryTokens query tokens and they read cached keys.
AttentionFamily attention_family_of(const Op& op);

/// The parts of an attention core the fitted formula reads.
struct AttentionTerms {
  double flops = 0.0, bytes = 0.0;
  double sequences = 1.0, heads = 1.0;
  double group = 1.0;   ///< the residual's third axis (see above)
  double length = 1.0;  ///< the longest sequence's tokens: its query tokens or the keys it reads
  static AttentionTerms of(const Op& op);
};

/// One (engine, family, compute dtype, KV dtype) attention fit on one GPU.
struct AttentionKernelFit {
  std::string engine = "trtllm";
  AttentionFamily family = AttentionFamily::kMhaDecode;
  DType compute_dtype = DType::kBf16;  ///< the math's tensor-core type (FP8 context FMHA: fp8)
  DType kv_dtype = DType::kBf16;       ///< the KV cache's element type
  std::string system;                  ///< the GPU the table was measured on
  double compute_efficiency = 0.5;  ///< η: fraction of the datasheet peak on the plateau
  double memory_efficiency = 0.8;   ///< β: fraction of HBM bandwidth a long KV stream reaches
  double overhead_us = 5.0;         ///< per launch
  double unit_us = 0.1;             ///< per (sequence, head) work item on one SM
  double blend = 2.0;               ///< p ≥ 1: how sharply compute and memory overlap
  ResidualGrid residual;  ///< axes: log sequences, log length, log group
  int fitted_rows = 0;
  double fitted_median_error = 0.0;

  /// Seconds of one launch over `t` on a GPU of peak `peak_flops` (compute_dtype), bandwidth
  /// `hbm_Bps` and `sms` SMs; with the residual table unless `physics_only`.
  double seconds(const AttentionTerms& t, double peak_flops, double hbm_Bps, int sms, bool physics_only = false) const;

  YAML::Node to_yaml() const;
  /// Throws std::runtime_error naming the bad field.
  static AttentionKernelFit from_yaml(const YAML::Node& node);
  /// "" when every parameter is physical; else what is not.
  std::string implausible() const;
};

}  // namespace moesim
