#pragma once
// What the benchmarks produce, in the shape of calibrate/measurements.hpp's JSON format
// ("moesim-measurements/1"), plus the machine description and the writer.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moesim::calib {

/// One GEMM sample; `group_m` is non-empty for a grouped GEMM (and m is its sum).
struct GemmRecord {
  std::string dtype;
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<std::int64_t> group_m;
  double time_us = 0.0;
};

/// One copy sample. kind: h2d_pinned, h2d_pageable, d2h_pinned, d2h_pageable, d2d, p2p.
struct MemcpyRecord {
  std::string kind;
  int src = 0, dst = 0;
  std::int64_t bytes = 0;
  double time_us = 0.0;
};

/// One collective sample with nccl-tests' algorithm and bus bandwidths (GB/s, 1e9 bytes).
struct CollectiveRecord {
  std::string op;  ///< all_reduce, all_gather, all_to_all, send_recv
  int gpus = 2;
  int nodes = 1;
  std::int64_t bytes = 0;
  double time_us = 0.0;
  double algbw_GBps = 0.0;
  double busbw_GBps = 0.0;
};

/// Everything one run measured, and what it could not measure (with the reason).
struct Results {
  std::string device;             ///< first GPU's name
  nlohmann::json environment;     ///< versions, devices, clocks (see environment.cpp)
  std::vector<GemmRecord> gemm;
  std::vector<MemcpyRecord> memcpy;
  std::vector<CollectiveRecord> collectives;
  std::vector<std::string> skipped;
};

/// Number of visible CUDA devices; without any, prints "no CUDA device (cudaGetDeviceCount: ...)"
/// and exits kExitNoDevice, which is what CI (nvcc and libraries, no GPU) sees.
int require_devices();

/// Driver, runtime, cuBLAS and NCCL versions and, per device, name, SMs, memory and clocks.
/// Also sets `results.device` to the first GPU's name.
void describe_environment(int device_count, Results& results);

/// The measurement file's JSON document.
nlohmann::json to_json(const Results& results);

/// Writes the JSON to `path` (through a temporary file renamed into place, so that an
/// interrupted run never leaves a truncated file); exits kExitIoError when it cannot.
void write_json(const Results& results, const std::string& path);

}  // namespace moesim::calib
