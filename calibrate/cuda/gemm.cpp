// Dense GEMM benchmark: for every dtype and weight shape (N, K), time Y[M,N] = X[M,K]·W[N,K]^T over
// the M sweep. This is the curve moesim's compute model fits its efficiency η_c(M) to: at small
// M the kernel streams W and is memory-bound, at large M it is compute-bound.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include <cublasLt.h>

#include "benchmarks.hpp"
#include "timer.hpp"

namespace moesim::calib {

bool gemm_dtype_supported(Dtype t, int device, std::string& why) {
  const int cc = compute_capability(device);
  const int need = t == Dtype::fp8 ? 89 : t == Dtype::bf16 ? 80 : 0;
  if (cc >= need) return true;
  why = std::string(dtype_name(t)) + ": device " + std::to_string(device) + " (" + device_name(device) +
        ") has compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
        ", needs " + std::to_string(need / 10) + "." + std::to_string(need % 10);
  return false;
}

void launch_gemm_ex(cublasHandle_t handle, Dtype t, int n, int m, int k, const void* w, const void* x,
                    void* y) {
  // Column-major view: W^T (k×n, ld k) transposed gives n×k; X^T (k×m, ld k); Y^T (n×m, ld n).
  // fp32 accumulation for every type: fp16/bf16 then use tensor cores (cuBLAS's default math mode
  // allows them), fp32 stays true fp32 (no TF32), as a model run in fp32 would.
  const float alpha = 1.0F;
  const float beta = 0.0F;
  const cudaDataType_t dt = dtype_cuda(t);
  CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, dt, k, x, dt, k, &beta, y,
                            dtype_cuda(output_dtype(t)), n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

std::size_t usable_memory(int device) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  device_memory(device, free_bytes, total_bytes);
  const std::size_t margin = std::max<std::size_t>(std::size_t{512} << 20, total_bytes / 20);
  return free_bytes > margin ? free_bytes - margin : 0;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

namespace {

/// cuBLASLt plan for one fp8 GEMM shape: descriptors plus the algorithm the heuristic chose.
/// FP8 kernels need the "TN" layout (A transposed, B not), which our W^T·X layout already is.
class Fp8Plan {
 public:
  Fp8Plan(cublasLtHandle_t lt, int n, int m, int k, std::size_t workspace_bytes) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T;
    const cublasOperation_t tb = CUBLAS_OP_N;
    // Fast accumulation is what FP8 inference engines run (TensorRT-LLM, vLLM's cuBLAS path).
    const std::int8_t fast_accum = 1;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum));
    const auto rows = [](int v) { return static_cast<std::uint64_t>(v); };
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_8F_E4M3, rows(k), rows(n), k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, CUDA_R_8F_E4M3, rows(k), rows(m), k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16BF, rows(n), rows(m), n));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, op_, a_, b_, c_, c_, pref, 1, &result, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    // NOT_SUPPORTED means "no kernel for this shape" (e.g. an unaligned N): a skip, not a failure.
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) algo_ = result.algo;
  }
  ~Fp8Plan() {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(c_));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b_));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a_));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op_));
  }
  Fp8Plan(const Fp8Plan&) = delete;
  Fp8Plan& operator=(const Fp8Plan&) = delete;

  bool usable() const { return algo_.has_value(); }

  /// Enqueues D = W^T·X on `stream` (C and D share Y; beta = 0).
  void launch(cublasLtHandle_t lt, const void* w, const void* x, void* y, void* workspace,
              std::size_t workspace_bytes, cudaStream_t stream) const {
    const float alpha = 1.0F;
    const float beta = 0.0F;
    CUBLAS_CHECK(cublasLtMatmul(lt, op_, &alpha, w, a_, x, b_, &beta, y, c_, y, c_, &*algo_, workspace,
                                workspace_bytes, stream));
  }

 private:
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  std::optional<cublasLtMatmulAlgo_t> algo_;
};

/// The M values whose activations fit next to the weights; the rest go to `skipped`.
std::vector<std::int64_t> fitting_m(const Options& o, Dtype t, std::int64_t n, std::int64_t k,
                                    std::size_t fixed_bytes, Results& results) {
  const std::size_t budget = usable_memory(0);
  const std::size_t per_row = static_cast<std::size_t>(k) * dtype_bytes(t) +
                              static_cast<std::size_t>(n) * dtype_bytes(output_dtype(t));
  std::vector<std::int64_t> ms;
  for (std::int64_t m : o.m_sweep) {
    if (fixed_bytes + static_cast<std::size_t>(m) * per_row <= budget) {
      ms.push_back(m);
    } else {
      results.skipped.push_back("gemm " + std::string(dtype_name(t)) + " m=" + std::to_string(m) + " n=" +
                                std::to_string(n) + " k=" + std::to_string(k) + ": needs more than the " +
                                human_bytes(static_cast<double>(budget)) + " of free device memory");
    }
  }
  return ms;
}

}  // namespace

void run_gemm(const Options& o, Results& results) {
  constexpr int device = 0;
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;  // cuBLASLt's recommended size on Hopper
  Stream stream(device);
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t lt = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream.get()));
  CUBLAS_CHECK(cublasLtCreate(&lt));
  const DeviceBuffer workspace(device, kWorkspace);
  const std::vector<Lane> lanes = {{device, stream.get()}};
  const TimingConfig timing{o.warmup, o.repeats};

  for (Dtype t : o.dtypes) {
    std::string why;
    if (!gemm_dtype_supported(t, device, why)) {
      results.skipped.push_back("gemm " + why);
      continue;
    }
    const std::string name(dtype_name(t));
    for (const auto& [n, k] : o.nk) {
      const std::size_t w_bytes = static_cast<std::size_t>(n * k) * dtype_bytes(t);
      const std::vector<std::int64_t> ms = fitting_m(o, t, n, k, w_bytes, results);
      if (ms.empty()) continue;
      const std::int64_t m_max = *std::max_element(ms.begin(), ms.end());
      progress("gemm " + name + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " (" +
               std::to_string(ms.size()) + " values of m)");
      const DeviceBuffer w(device, w_bytes);
      const DeviceBuffer x(device, static_cast<std::size_t>(m_max * k) * dtype_bytes(t));
      const DeviceBuffer y(device, static_cast<std::size_t>(m_max * n) * dtype_bytes(output_dtype(t)));
      fill_random(w, t, 1);
      fill_random(x, t, 2);
      for (std::int64_t m : ms) {
        const int ni = static_cast<int>(n), mi = static_cast<int>(m), ki = static_cast<int>(k);
        double us = 0.0;
        if (t == Dtype::fp8) {
          const Fp8Plan plan(lt, ni, mi, ki, kWorkspace);
          if (!plan.usable()) {
            results.skipped.push_back("gemm fp8 m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                                      std::to_string(k) + ": cuBLASLt has no fp8 kernel for this shape");
            continue;
          }
          us = time_median_us(lanes, [&] {
            plan.launch(lt, w.get(), x.get(), y.get(), workspace.get(), kWorkspace, stream.get());
          }, timing);
        } else {
          us = time_median_us(lanes, [&] { launch_gemm_ex(handle, t, ni, mi, ki, w.get(), x.get(), y.get()); },
                              timing);
        }
        results.gemm.push_back({name, m, n, k, {}, us});
      }
    }
  }
  CUBLAS_CHECK(cublasLtDestroy(lt));
  CUBLAS_CHECK(cublasDestroy(handle));
}

}  // namespace moesim::calib
