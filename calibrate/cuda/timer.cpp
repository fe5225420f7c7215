// Event-pair timing with warm-up, adaptive batching and a median over repeats.
#include "timer.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "common.hpp"

namespace moesim::calib {

namespace {

/// Start and end events on every lane, created on the lane's device (events are per device).
class LaneEvents {
 public:
  explicit LaneEvents(const std::vector<Lane>& lanes) : lanes_(lanes) {
    for (const Lane& lane : lanes_) {
      CUDA_CHECK(cudaSetDevice(lane.device));
      cudaEvent_t start = nullptr;
      cudaEvent_t end = nullptr;
      CUDA_CHECK(cudaEventCreate(&start));
      CUDA_CHECK(cudaEventCreate(&end));
      start_.push_back(start);
      end_.push_back(end);
    }
  }
  ~LaneEvents() {
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      CUDA_CHECK(cudaSetDevice(lanes_[i].device));
      CUDA_CHECK(cudaEventDestroy(start_[i]));
      CUDA_CHECK(cudaEventDestroy(end_[i]));
    }
  }
  LaneEvents(const LaneEvents&) = delete;
  LaneEvents& operator=(const LaneEvents&) = delete;

  /// Records the start (or end) event on every lane's stream.
  void record(bool start) {
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      CUDA_CHECK(cudaSetDevice(lanes_[i].device));
      CUDA_CHECK(cudaEventRecord(start ? start_[i] : end_[i], lanes_[i].stream));
    }
  }

  /// Waits for the end events and returns the slowest lane's elapsed time in microseconds.
  double slowest_us() {
    double slowest = 0.0;
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      CUDA_CHECK(cudaSetDevice(lanes_[i].device));
      CUDA_CHECK(cudaEventSynchronize(end_[i]));
      float ms = 0.0F;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start_[i], end_[i]));
      slowest = std::max(slowest, static_cast<double>(ms) * 1000.0);
    }
    return slowest;
  }

 private:
  const std::vector<Lane>& lanes_;
  std::vector<cudaEvent_t> start_;
  std::vector<cudaEvent_t> end_;
};

/// Waits until every lane's stream is idle.
void synchronize(const std::vector<Lane>& lanes) {
  for (const Lane& lane : lanes) {
    CUDA_CHECK(cudaSetDevice(lane.device));
    CUDA_CHECK(cudaStreamSynchronize(lane.stream));
  }
}

}  // namespace

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  if (n == 0) return 0.0;
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double time_median_us(const std::vector<Lane>& lanes, const std::function<void()>& launch,
                      const TimingConfig& config) {
  LaneEvents events(lanes);

  // Warm-up: first calls pick cuBLAS heuristics, set up NCCL channels and raise clocks.
  for (int i = 0; i < config.warmup; ++i) launch();
  synchronize(lanes);

  // One timed probe decides the batch size, so that short operations are timed back to back
  // (their steady-state cost inside a model's layer) while long ones are timed one at a time.
  events.record(true);
  launch();
  events.record(false);
  const double probe_us = events.slowest_us();
  int batch = 1;
  if (probe_us > 0.0 && probe_us < config.min_batch_us) {
    batch = static_cast<int>(std::ceil(config.min_batch_us / probe_us));
  }
  batch = std::clamp(batch, 1, std::max(1, config.max_batch));

  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(std::max(1, config.repeats)));
  for (int r = 0; r < std::max(1, config.repeats); ++r) {
    events.record(true);
    for (int i = 0; i < batch; ++i) launch();
    events.record(false);
    samples.push_back(events.slowest_us() / batch);
  }
  synchronize(lanes);
  return median(std::move(samples));
}

}  // namespace moesim::calib
