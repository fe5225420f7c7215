#pragma once
// Descriptions of work that models produce and cost models price. Data only: the engine never
// interprets them, and a policy never turns them into durations itself.
#include <cstdint>
#include <string>
#include <vector>

namespace moesim {

enum class DType { kFp32 = 0, kFp16 = 1, kBf16 = 2, kFp8 = 3 };
inline constexpr int kNumDTypes = 4;
const char* dtype_name(DType t);
/// Bytes per element.
double dtype_bytes(DType t);
/// Parses "fp32|fp16|bf16|fp8"; returns false on an unknown name.
bool parse_dtype(const std::string& s, DType& out);

enum class OpKind {
  kGemm,         ///< C[m,n] = A[m,k]·B[k,n], `batch` independent copies
  kGroupedGemm,  ///< one kernel over groups with the same (n,k) and per-group m (`group_m`)
  kAttention,    ///< score + softmax + value product (flops and bytes given)
  kElementwise,  ///< memory-bound pass over `bytes` (norms, activations, residual adds)
};

/// One kernel-level operation. `flops` and `bytes` are totals for the op.
struct Op {
  OpKind kind = OpKind::kElementwise;
  const char* name = "";  ///< static label, e.g. "attn.qkv", "expert.up"
  DType dtype = DType::kBf16;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;
  std::vector<std::int64_t> group_m;  ///< kGroupedGemm: tokens per group (expert)
  double flops = 0.0;
  double bytes = 0.0;  ///< bytes that must move through HBM (weights + activations)
};

/// A GEMM op with flops and bytes filled in from its shape.
Op make_gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, DType dt,
             std::int64_t batch = 1);
/// A grouped GEMM over groups of `group_m` rows sharing (n, k) shapes but distinct weights.
Op make_grouped_gemm(const char* name, std::vector<std::int64_t> group_m, std::int64_t n,
                     std::int64_t k, DType dt);
/// A memory-bound elementwise op over `elements` values read and written once each.
Op make_elementwise(const char* name, double elements, DType dt, double flops_per_element = 1.0);

}  // namespace moesim
