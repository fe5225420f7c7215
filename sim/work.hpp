#pragma once
// Descriptions of work that models produce and cost models price. Data only: the engine never
// interprets them, and a policy never turns them into durations itself.
#include <cstdint>
#include <string>
#include <vector>

namespace moesim {

/// Element types. The 4-bit formats carry block scales, counted in their bytes per element:
/// NVFP4 (E2M1 values, one FP8 E4M3 scale per 16 values: 4.5 bits; NVIDIA's Blackwell format, as
/// in nvidia/DeepSeek-R1-FP4) and MXFP4 (E2M1 values, one E8M0 scale per 32 values: 4.25 bits; the
/// OCP Microscaling format v1.0 §5.2, as GPT-OSS stores its experts). INT4 is a weight-only
/// format (symmetric 4-bit integers, one bf16 scale per 32 values: 4.5 bits; compressed-tensors'
/// pack-quantized group-32 weights, as Kimi-K2.5 stores its experts): dequantised in the kernel
/// (Marlin-class W4A16), never the type the math runs in.
enum class DType { kFp32 = 0, kFp16 = 1, kBf16 = 2, kFp8 = 3, kNvFp4 = 4, kMxFp4 = 5, kInt4 = 6 };
inline constexpr int kNumDTypes = 7;
const char* dtype_name(DType t);
/// Bytes per element, block scales included for the 4-bit formats.
double dtype_bytes(DType t);
/// True for the 4-bit formats (one tensor-core peak, `fp4`, serves both).
bool is_fp4(DType t);
/// Parses "fp32|fp16|bf16|fp8|nvfp4|mxfp4|int4" ("fp4" = nvfp4); returns false on an unknown name.
bool parse_dtype(const std::string& s, DType& out);
/// The names parse_dtype accepts, in order (for choice lists and help).
const std::vector<std::string>& dtype_names();

enum class OpKind {
  kGemm,         ///< C[m,n] = A[m,k]·B[k,n], `batch` independent copies
  kGroupedGemm,  ///< one kernel over groups with the same (n,k) and per-group m (`group_m`)
  kAttention,    ///< score + softmax + value product (flops and bytes given)
  kElementwise,  ///< memory-bound pass over `bytes` (norms, activations, residual adds)
  /// Host (CPU) work, not a kernel: `name` says what runs, `m` its size in that work's units, and
  /// `flops` holds its reference time in seconds (hardware/host_cost.hpp reads and writes it).
  kHost,
};

/// Which attention kernel an attention core runs (the kernel tables time each separately): the
/// query/key/value form of MHA, GQA and MQA; MLA with its KV decompressed (prefill: qk 192 and v
/// 128 per head); MLA over the compressed latent cache (absorbed decode, DeepSeek-V2 §2.1.2).
/// Two forms no kernel table measures, priced at the roofline: Gated DeltaNet's chunked delta
/// rule (kLinear) and DeepSeek Sparse Attention's FP8 lightning indexer (kIndexer).
enum class AttentionForm : std::uint8_t { kGqa = 0, kMlaFull = 1, kMlaLatent = 2, kLinear = 3, kIndexer = 4 };

/// One kernel-level operation. `flops` and `bytes` are totals for the op.
struct Op {
  OpKind kind = OpKind::kElementwise;
  const char* name = "";  ///< static label, e.g. "attn.qkv", "expert.up"
  DType dtype = DType::kBf16;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;
  std::vector<std::int64_t> group_m;  ///< kGroupedGemm: tokens per group (expert)
  /// kAttention: query and KV heads (`batch` = sequences × heads), the kernel's form and the KV
  /// cache's element type; what a kernel fit reads beside flops and bytes.
  std::int64_t heads = 0, kv_heads = 0;
  AttentionForm attention = AttentionForm::kGqa;
  DType kv_dtype = DType::kBf16;
  double flops = 0.0;
  double bytes = 0.0;  ///< bytes that must move through HBM (weights + activations)
};

/// A GEMM op with flops and bytes filled in from its shape.
Op make_gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, DType dt,
             std::int64_t batch = 1);
/// A GEMM whose weights (k x n) are stored in `weight_dt` and whose math runs in `compute_dt`
/// (which picks the tensor-core peak): activations move in compute_dt, weights in weight_dt.
/// W4A4 NVFP4 runs both in fp4; weight-only quantisation (W4A16, W8A16) computes in bf16/fp16.
Op make_quantized_gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, DType compute_dt,
                       DType weight_dt);
/// A grouped GEMM over groups of `group_m` rows sharing (n, k) shapes but distinct weights.
Op make_grouped_gemm(const char* name, std::vector<std::int64_t> group_m, std::int64_t n,
                     std::int64_t k, DType dt);
/// make_grouped_gemm with weights stored in `weight_dt` and math in `compute_dt` (see
/// make_quantized_gemm).
Op make_quantized_grouped_gemm(const char* name, std::vector<std::int64_t> group_m, std::int64_t n,
                               std::int64_t k, DType compute_dt, DType weight_dt);
/// A memory-bound elementwise op over `elements` values read and written once each.
Op make_elementwise(const char* name, double elements, DType dt, double flops_per_element = 1.0);

}  // namespace moesim
