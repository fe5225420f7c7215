#include "sim/work.hpp"

namespace moesim {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kNvFp4: return "nvfp4";
    case DType::kMxFp4: return "mxfp4";
    case DType::kInt4: return "int4";
  }
  return "?";
}

double dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp32: return 4.0;
    case DType::kFp16:
    case DType::kBf16: return 2.0;
    case DType::kFp8: return 1.0;
    // 4-bit values plus one 8-bit scale per block: 16 values (NVFP4), 32 values (MXFP4).
    case DType::kNvFp4: return 0.5 + 1.0 / 16.0;
    case DType::kMxFp4: return 0.5 + 1.0 / 32.0;
    // 4-bit integers plus one 16-bit scale per 32 values.
    case DType::kInt4: return 0.5 + 2.0 / 32.0;
  }
  return 2.0;
}

bool is_fp4(DType t) { return t == DType::kNvFp4 || t == DType::kMxFp4; }

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"fp32", "fp16", "bf16", "fp8", "fp4", "nvfp4", "mxfp4", "int4"};
  return names;
}

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "fp32") out = DType::kFp32;
  else if (s == "fp16") out = DType::kFp16;
  else if (s == "bf16") out = DType::kBf16;
  else if (s == "fp8") out = DType::kFp8;
  else if (s == "fp4" || s == "nvfp4") out = DType::kNvFp4;
  else if (s == "mxfp4") out = DType::kMxFp4;
  else if (s == "int4") out = DType::kInt4;
  else return false;
  return true;
}

Op make_gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, DType dt,
             std::int64_t batch) {
  Op op;
  op.kind = OpKind::kGemm;
  op.name = name;
  op.dtype = dt;
  op.m = m;
  op.n = n;
  op.k = k;
  op.batch = batch;
  const double b = static_cast<double>(batch);
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * b;
  op.bytes = dtype_bytes(dt) * b *
             (static_cast<double>(m) * static_cast<double>(k) + static_cast<double>(k) * static_cast<double>(n) +
              static_cast<double>(m) * static_cast<double>(n));
  return op;
}

namespace {

/// A 4-bit GEMM writes its output in bf16 (the FP4 kernels of TensorRT-LLM and FlashInfer
/// quantise the next input themselves); wider types write their own.
double output_bytes(DType compute_dt) { return is_fp4(compute_dt) ? 2.0 : dtype_bytes(compute_dt); }

}  // namespace

Op make_quantized_gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, DType compute_dt,
                       DType weight_dt) {
  Op op = make_gemm(name, m, n, k, compute_dt);
  const double md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
  op.bytes = dtype_bytes(compute_dt) * md * kd + output_bytes(compute_dt) * md * nd + dtype_bytes(weight_dt) * kd * nd;
  return op;
}

Op make_quantized_grouped_gemm(const char* name, std::vector<std::int64_t> group_m, std::int64_t n,
                               std::int64_t k, DType compute_dt, DType weight_dt) {
  Op op = make_grouped_gemm(name, std::move(group_m), n, k, compute_dt);
  const double rows = static_cast<double>(op.m), groups = static_cast<double>(op.batch);
  const double nd = static_cast<double>(n), kd = static_cast<double>(k);
  op.bytes = dtype_bytes(compute_dt) * rows * kd + output_bytes(compute_dt) * rows * nd +
             dtype_bytes(weight_dt) * groups * kd * nd;
  return op;
}

Op make_grouped_gemm(const char* name, std::vector<std::int64_t> group_m, std::int64_t n,
                     std::int64_t k, DType dt) {
  Op op;
  op.kind = OpKind::kGroupedGemm;
  op.name = name;
  op.dtype = dt;
  op.n = n;
  op.k = k;
  double rows = 0.0;
  double groups = 0.0;
  for (auto m : group_m) {
    if (m <= 0) continue;  // an expert with no tokens loads no weights
    rows += static_cast<double>(m);
    groups += 1.0;
  }
  op.m = static_cast<std::int64_t>(rows);
  op.batch = static_cast<std::int64_t>(groups);
  op.group_m = std::move(group_m);
  const double nd = static_cast<double>(n), kd = static_cast<double>(k);
  op.flops = 2.0 * rows * nd * kd;
  op.bytes = dtype_bytes(dt) * (groups * kd * nd + rows * kd + rows * nd);
  return op;
}

Op make_elementwise(const char* name, double elements, DType dt, double flops_per_element) {
  Op op;
  op.kind = OpKind::kElementwise;
  op.name = name;
  op.dtype = dt;
  op.flops = elements * flops_per_element;
  op.bytes = 2.0 * elements * dtype_bytes(dt);
  return op;
}

}  // namespace moesim
