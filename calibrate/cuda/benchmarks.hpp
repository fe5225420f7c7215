#pragma once
// The four measured operation families, one file each (as nccl-tests keeps one file per
// collective): every function appends its samples to `results` and says in
// `results.skipped` what it could not measure on this machine, and why.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cublas_v2.h>

#include "common.hpp"
#include "options.hpp"
#include "results.hpp"

namespace moesim::calib {

/// Dense GEMM sweep (gemm.cpp): device 0, cuBLAS for fp32/fp16/bf16, cuBLASLt for fp8.
void run_gemm(const Options& options, Results& results);

/// Grouped expert GEMM sweep (grouped_gemm.cpp): device 0, E experts, skewed token split.
void run_grouped_gemm(const Options& options, Results& results);

/// Copy sweep (memcpy.cpp): H2D/D2H pinned and pageable, D2D on device 0, P2P between pairs.
void run_memcpy(const Options& options, Results& results);

/// NCCL sweep (nccl.cpp): all_reduce, all_gather, all_to_all, send_recv on the first
/// `options.gpus` (or all) devices in this process.
void run_nccl(const Options& options, Results& results);

/// Whether `device` can run a GEMM in `t`; if not, `why` says so for the skipped list.
/// bf16 tensor cores need compute capability 8.0, fp8 needs 8.9 (Ada, Hopper and later).
bool gemm_dtype_supported(Dtype t, int device, std::string& why);

/// Enqueues Y[m,n] = X[m,k]·W[n,k]^T with cublasGemmEx (the nn.Linear layout: weights stored
/// [out, in] row-major) in fp32, fp16 or bf16 with fp32 accumulation; not for fp8.
void launch_gemm_ex(cublasHandle_t handle, Dtype t, int n, int m, int k, const void* w, const void* x,
                    void* y);

/// Bytes of `device` memory a benchmark may allocate: free memory less a margin for cuBLAS and
/// NCCL workspaces and the CUDA context's own growth.
std::size_t usable_memory(int device);

/// "1.5 GiB"-style rendering of a byte count for messages.
std::string human_bytes(double bytes);

}  // namespace moesim::calib
