#pragma once
// Measured timings: what `moesim-calibrate` writes (JSON, format "moesim-measurements/1") and
// what the importers turn other tools' output into (nccl-tests text, vidur and LLMCompass CSVs).
// The fitter reads only this.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moesim::calibration {

/// The "format" value of a measurement file this build reads and writes.
inline constexpr const char* kMeasurementsFormat = "moesim-measurements/1";

/// Upper bounds every reader enforces, so sizes stay in range of the `int` fields and of the
/// arithmetic on them: a GEMM dimension is an `int` in cuBLAS, and no cluster has 2^20 GPUs.
inline constexpr std::int64_t kMaxGemmDim = std::numeric_limits<std::int32_t>::max();
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;

/// One timed GEMM: C[m,n] = A[m,k]·B[k,n] in `dtype` ("fp32", "fp16", "bf16", "fp8").
/// For a grouped GEMM, `group_m` lists each group's rows and m is their sum.
struct GemmSample {
  std::string dtype = "fp16";
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<std::int64_t> group_m;  ///< empty for a plain GEMM
  double time_us = 0.0;               ///< kernel time (median of repeats)
};

/// One timed copy. kind: "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable", "d2d", "p2p".
struct MemcpySample {
  std::string kind;
  int src = 0, dst = 0;  ///< device indices (p2p); 0 otherwise
  double bytes = 0.0;
  double time_us = 0.0;
};

/// One timed collective. op: "all_reduce", "all_gather", "all_to_all", "send_recv".
/// `bytes` is the per-rank buffer as nccl-tests reports "size" (all-gather: the output buffer).
/// `nodes` > 1 means the GPUs span that many nodes (`gpus / nodes` per node).
struct CollectiveSample {
  std::string op;
  int gpus = 2;
  int nodes = 1;
  double bytes = 0.0;
  double time_us = 0.0;
};

/// A measurement file: where it came from and every sample.
struct Measurements {
  std::string source;                   ///< "moesim-calibrate", "nccl-tests", "vidur", ...
  std::string device;                   ///< GPU name as the driver reports it, if known
  nlohmann::json environment;           ///< driver/CUDA/cuBLAS/NCCL versions, clocks, devices
  std::vector<GemmSample> gemm;
  std::vector<MemcpySample> memcpy;
  std::vector<CollectiveSample> collectives;
  std::vector<std::string> skipped;     ///< what was not measured, and why

  void append(const Measurements& other);
  nlohmann::json to_json() const;
  static Measurements from_json(const nlohmann::json& j);  ///< throws std::runtime_error
};

/// Loads any supported file, recognised by content: moesim JSON, nccl-tests text output,
/// vidur's compute (mlp.csv) and network (all_reduce.csv / send_recv.csv) profiles, and
/// LLMCompass's matmul CSV and collective sweep CSV. Throws InputError (file:line) on unreadable
/// or unrecognised input.
Measurements load_measurements(const std::string& path);

/// Like load_measurements, but a file of no supported format (a README, a licence, a directory
/// in a `DIR/*` glob) gives nullopt instead of an error. A recognised file with bad content still
/// throws InputError.
std::optional<Measurements> load_measurements_if_recognised(const std::string& path);

/// Importers, one per format (`origin` names the file in errors).
Measurements import_nccl_tests(const std::string& text, const std::string& origin);
Measurements import_vidur_network_csv(const std::string& text, const std::string& origin);
Measurements import_vidur_mlp_csv(const std::string& text, const std::string& origin);
Measurements import_llmcompass_matmul_csv(const std::string& text, const std::string& origin);
/// A one-node collective sweep as LLMCompass publishes its measured all-reduce
/// (size_bytes,latency_us,algbw_GBps,busbw_GBps). The columns do not name the collective: `op`
/// (from the file name) does; the GPU count is read from busbw/algbw, the op's bus factor
/// (send_recv: 2 GPUs). The columns cannot say how many nodes: one is assumed.
Measurements import_collective_sweep_csv(const std::string& text, const std::string& origin, const std::string& op);

/// nccl-tests output with the collective named by the caller ("all_gather", "alltoall_perf", ...;
/// "" = infer). A log's own "# Collective test starting: X_perf" line wins; the hint settles logs
/// without one, where all_gather and alltoall print identical columns. load_measurements takes
/// the hint from the file name. Throws InputError on an unknown hint.
Measurements import_nccl_tests(const std::string& text, const std::string& origin,
                               const std::string& op_hint);

/// The collective op ("all_reduce", "all_gather", "all_to_all", "send_recv") that `name` refers
/// to: the op itself, an nccl-tests binary ("alltoall_perf") or a file name containing one
/// ("all_reduce_perf_8gpu.log"); "" when it names none of them.
std::string collective_op_from_name(const std::string& name);

}  // namespace moesim::calibration
