// Grouped expert GEMM benchmark: one MoE projection over E experts, each with its own weights and
// its own share of T tokens, timed as one operation. A skewed split makes the hot expert
// compute-bound while cold experts stay memory-bound, which is exactly what moesim's grouped-GEMM
// model has to price (HarMoEny's and MoEShard's skewed workloads).
#include <algorithm>
#include <numeric>
#include <vector>

#include "benchmarks.hpp"
#include "timer.hpp"

// cublasGemmGroupedBatchedEx exists from cuBLAS 12.5 on; older toolkits fall back to a loop.
#if CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 5)
#define MOESIM_HAVE_GROUPED_GEMM 1
#else
#define MOESIM_HAVE_GROUPED_GEMM 0
#endif

namespace moesim::calib {

namespace {

/// Token counts per expert for `total` tokens: p_i ∝ 1/E + skew for the first max(1, E/10)
/// experts (MoEShard's skew model), rounded by largest remainder so that they sum to `total`.
std::vector<std::int64_t> skewed_split(std::int64_t total, int experts, double skew) {
  const int hot = std::max(1, experts / 10);
  std::vector<double> p(static_cast<std::size_t>(experts));
  for (int i = 0; i < experts; ++i) p[static_cast<std::size_t>(i)] = 1.0 / experts + (i < hot ? skew : 0.0);
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  std::vector<std::int64_t> counts(p.size());
  std::vector<std::pair<double, int>> remainders;
  std::int64_t assigned = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double exact = static_cast<double>(total) * p[i] / sum;
    counts[i] = static_cast<std::int64_t>(exact);
    assigned += counts[i];
    remainders.emplace_back(exact - static_cast<double>(counts[i]), static_cast<int>(i));
  }
  // Largest remainder first; ties go to the lower index so the split is deterministic.
  std::sort(remainders.begin(), remainders.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (std::size_t i = 0; assigned < total; ++i, ++assigned) ++counts[static_cast<std::size_t>(remainders[i].second)];
  return counts;
}

/// The per-group argument arrays of one grouped call (only experts with tokens take part).
struct GroupedCall {
  std::vector<cublasOperation_t> transa, transb;
  std::vector<int> m, n, k, lda, ldb, ldc, group_size;
  std::vector<float> alpha, beta;
  std::vector<const void*> a, b;
  std::vector<void*> c;
};

/// Builds the call for `counts` over weights W[e] (n×k each), activations X and outputs Y.
GroupedCall build_call(const std::vector<std::int64_t>& counts, Dtype t, std::int64_t n, std::int64_t k,
                       const DeviceBuffer& w, const DeviceBuffer& x, const DeviceBuffer& y) {
  GroupedCall call;
  const std::size_t in = dtype_bytes(t);
  const std::size_t out = dtype_bytes(output_dtype(t));
  std::int64_t row = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    const std::int64_t tokens = counts[e];
    if (tokens > 0) {
      // Same nn.Linear layout as gemm.cpp: cuBLAS m = N, n = tokens, A = W^T, B = X^T.
      call.transa.push_back(CUBLAS_OP_T);
      call.transb.push_back(CUBLAS_OP_N);
      call.m.push_back(static_cast<int>(n));
      call.n.push_back(static_cast<int>(tokens));
      call.k.push_back(static_cast<int>(k));
      call.lda.push_back(static_cast<int>(k));
      call.ldb.push_back(static_cast<int>(k));
      call.ldc.push_back(static_cast<int>(n));
      call.group_size.push_back(1);
      call.alpha.push_back(1.0F);
      call.beta.push_back(0.0F);
      call.a.push_back(w.bytes() + e * static_cast<std::size_t>(n * k) * in);
      call.b.push_back(x.bytes() + static_cast<std::size_t>(row * k) * in);
      call.c.push_back(y.bytes() + static_cast<std::size_t>(row * n) * out);
    }
    row += tokens;
  }
  return call;
}

/// Enqueues the experts one cublasGemmEx after another on the handle's stream: the fallback
/// where the grouped API is missing or refuses the type.
void launch_loop(cublasHandle_t handle, Dtype t, const GroupedCall& call) {
  for (std::size_t g = 0; g < call.m.size(); ++g) {
    launch_gemm_ex(handle, t, call.m[g], call.n[g], call.k[g], call.a[g], call.b[g], call.c[g]);
  }
}

#if MOESIM_HAVE_GROUPED_GEMM
/// One cublasGemmGroupedBatchedEx call; the pointer arrays live in device memory (`ptrs`),
/// the per-group scalars and sizes on the host, as the API requires.
cublasStatus_t launch_grouped(cublasHandle_t handle, Dtype t, const GroupedCall& call, const DeviceBuffer& ptrs) {
  const std::size_t g = call.m.size();
  const auto* a = reinterpret_cast<const void* const*>(ptrs.bytes());
  const auto* b = reinterpret_cast<const void* const*>(ptrs.bytes() + g * sizeof(void*));
  auto* c = reinterpret_cast<void* const*>(ptrs.bytes() + 2 * g * sizeof(void*));
  const cudaDataType_t dt = dtype_cuda(t);
  return cublasGemmGroupedBatchedEx(handle, call.transa.data(), call.transb.data(), call.m.data(), call.n.data(),
                                    call.k.data(), call.alpha.data(), a, dt, call.lda.data(), b, dt,
                                    call.ldb.data(), call.beta.data(), c, dtype_cuda(output_dtype(t)),
                                    call.ldc.data(), static_cast<int>(g), call.group_size.data(),
                                    CUBLAS_COMPUTE_32F);
}
#endif

}  // namespace

void run_grouped_gemm(const Options& o, Results& results) {
  constexpr int device = 0;
  Stream stream(device);
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream.get()));
  const std::vector<Lane> lanes = {{device, stream.get()}};
  const TimingConfig timing{o.warmup, o.repeats};
  const std::int64_t t_max = *std::max_element(o.m_sweep.begin(), o.m_sweep.end());
  // Pointer arrays for A, B and C, one entry per expert each.
  const DeviceBuffer ptrs(device, 3 * static_cast<std::size_t>(o.experts) * sizeof(void*));

  for (Dtype t : o.dtypes) {
    const std::string name(dtype_name(t));
    std::string why;
    if (t == Dtype::fp8) {
      results.skipped.push_back("grouped-gemm fp8: cublasGemmGroupedBatchedEx has no fp8 types");
      continue;
    }
    if (!gemm_dtype_supported(t, device, why)) {
      results.skipped.push_back("grouped-gemm " + why);
      continue;
    }
    bool grouped = MOESIM_HAVE_GROUPED_GEMM != 0;
    for (const auto& [n, k] : o.nk) {
      const std::size_t w_bytes =
          static_cast<std::size_t>(o.experts) * static_cast<std::size_t>(n * k) * dtype_bytes(t);
      const std::size_t xy_bytes = static_cast<std::size_t>(t_max) *
                                   (static_cast<std::size_t>(k) * dtype_bytes(t) +
                                    static_cast<std::size_t>(n) * dtype_bytes(output_dtype(t)));
      if (w_bytes + xy_bytes > usable_memory(device)) {
        results.skipped.push_back("grouped-gemm " + name + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                  ": " + std::to_string(o.experts) + " experts need " +
                                  human_bytes(static_cast<double>(w_bytes + xy_bytes)) + " of device memory");
        continue;
      }
      progress("grouped-gemm " + name + " E=" + std::to_string(o.experts) + " n=" + std::to_string(n) +
               " k=" + std::to_string(k) + " (" + std::to_string(o.m_sweep.size()) + " token totals)");
      const DeviceBuffer w(device, w_bytes);
      const DeviceBuffer x(device, static_cast<std::size_t>(t_max * k) * dtype_bytes(t));
      const DeviceBuffer y(device, static_cast<std::size_t>(t_max * n) * dtype_bytes(output_dtype(t)));
      fill_random(w, t, 3);
      fill_random(x, t, 4);
      for (std::int64_t total : o.m_sweep) {
        const std::vector<std::int64_t> counts = skewed_split(total, o.experts, o.skew);
        const GroupedCall call = build_call(counts, t, n, k, w, x, y);
        std::vector<const void*> host_ptrs(call.a);
        host_ptrs.insert(host_ptrs.end(), call.b.begin(), call.b.end());
        host_ptrs.insert(host_ptrs.end(), call.c.begin(), call.c.end());
        CUDA_CHECK(cudaMemcpy(ptrs.get(), host_ptrs.data(), host_ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice));
#if MOESIM_HAVE_GROUPED_GEMM
        if (grouped) {
          // Trial call: some architectures reject a type in the grouped API; fall back, say so.
          const cublasStatus_t st = launch_grouped(handle, t, call, ptrs);
          if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH) {
            grouped = false;
          } else {
            CUBLAS_CHECK(st);
          }
        }
#endif
        const double us = time_median_us(lanes, [&] {
#if MOESIM_HAVE_GROUPED_GEMM
          if (grouped) {
            CUBLAS_CHECK(launch_grouped(handle, t, call, ptrs));
            return;
          }
#endif
          launch_loop(handle, t, call);
        }, timing);
        results.gemm.push_back({name, total, n, k, counts, us});
      }
    }
    results.environment["grouped_gemm_api"][name] = grouped ? "cublasGemmGroupedBatchedEx" : "loop of cublasGemmEx";
  }
  CUBLAS_CHECK(cublasDestroy(handle));
}

}  // namespace moesim::calib
