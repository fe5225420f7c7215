#pragma once
// CUDA-event timing of one operation that may span several devices (an NCCL collective runs on
// every rank's stream). Warm-up first, then a median over repeats, as nccl-tests and cuBLAS
// benchmarks do, so that one descheduled launch or clock ramp does not become the sample.
#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace moesim::calib {

/// A stream the timed operation runs on, and the device that owns it.
struct Lane {
  int device = 0;
  cudaStream_t stream = nullptr;
};

/// How to time: `warmup` untimed launches, then `repeats` timed batches.
struct TimingConfig {
  int warmup = 5;
  int repeats = 20;
  /// Each timed batch runs the operation back to back until it lasts about this long, so that
  /// a 3 µs kernel is not measured as launch latency plus event resolution (0.5 µs).
  double min_batch_us = 200.0;
  int max_batch = 64;
};

/// Median time of one operation in microseconds. `launch` enqueues exactly one operation on
/// every lane's stream (for NCCL: one ncclGroupStart/End over all ranks). Each repeat records a
/// start and end event on every lane around a batch of launches; the repeat's time is the
/// slowest lane's elapsed time divided by the batch size (a collective ends when its last rank
/// does).
double time_median_us(const std::vector<Lane>& lanes, const std::function<void()>& launch,
                      const TimingConfig& config);

/// Median of a non-empty sample (the mean of the two middle values for an even count).
double median(std::vector<double> values);

}  // namespace moesim::calib
