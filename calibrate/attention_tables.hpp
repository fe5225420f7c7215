#pragma once
// Measured attention tables (TensorRT-LLM's attention and MLA ops, ../shared/data/kernels/
// MANIFEST.md): read with every bad cell located, each row turned into the attention core op the
// serving model prices (models/operators.cpp), and fitted to AttentionKernelFits (issue 47).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/held_out_score.hpp"
#include "hardware/attention_kernel_fit.hpp"
#include "hardware/gpu_spec.hpp"
#include "sim/work.hpp"

namespace moesim::calibration {

/// One row of an attention table: one attention op timed on one GPU.
struct AttentionTableRow {
  std::string system;
  AttentionFamily family = AttentionFamily::kMhaDecode;
  DType compute = DType::kBf16, kv = DType::kBf16;
  std::int64_t batch = 0;
  std::int64_t length = 0;  ///< prefill: the prompt's tokens; decode: the cached KV length
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  double time_us = 0.0;
  int line = 0;
};

/// Reads generation_attention.csv, context_attention.csv, generation_mla.csv or
/// context_mla.csv (`kind` as kernel_table_kind names them). Throws InputError at FILE:LINE:COL
/// for a missing column, a bad number or dtype, heads not a multiple of KV heads, and the same
/// shape measured twice with different times.
std::vector<AttentionTableRow> read_attention_table(const std::string& text, const std::string& path,
                                                    const std::string& kind);

/// The attention core op (models/operators.cpp) the row's kernel computes: MHA/GQA with the
/// row's heads, KV heads, head_dim and window; MLA with DeepSeek-V3's dimensions (the collector's:
/// kv_lora_rank 512, rope 64, nope 128, v 128), decompressed in prefill and over the latent cache
/// in decode. Decode rows are one new token over `length` cached ones. `moesim cost attention`
/// and `mla` price exactly this op.
Op attention_row_op(const AttentionTableRow& row);

/// The held-out rule, fixed before any fit: within each (family, compute, KV dtype), the
/// distinct lengths and head counts are sorted and every fourth from the third on (indices 2,
/// 6, 10, ...; never the last) is held out; a row is held out when its length or its heads are.
std::vector<char> held_out_attention_rows(const std::vector<AttentionTableRow>& rows);

/// Errors of one fit on its rows; the reference is the datasheet roofline.
struct AttentionFitScore : HeldOutScore {
  AttentionFamily family = AttentionFamily::kMhaDecode;
  DType compute = DType::kBf16, kv = DType::kBf16;
};

/// Fits every (family, compute, KV dtype) of `rows` measured on `system` for `gpu`; with
/// `holdout`, held_out_attention_rows are left out and scored into `scores`.
std::vector<AttentionKernelFit> fit_attention_tables(const std::vector<AttentionTableRow>& rows,
                                                     const std::string& system, const GpuSpec& gpu, bool holdout,
                                                     std::vector<AttentionFitScore>* scores = nullptr);

nlohmann::json score_json(const AttentionFitScore& s);

}  // namespace moesim::calibration
