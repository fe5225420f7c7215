// Copy benchmark: host<->device over PCIe (pinned and pageable), device-local copies (HBM) and
// peer-to-peer copies between every GPU pair (NVLink or PCIe). These price HarMoEny's expert
// fetch from host memory and the links of moesim's topology graph.
#include <algorithm>
#include <vector>

#include "benchmarks.hpp"
#include "timer.hpp"

namespace moesim::calib {

namespace {

/// Times cudaMemcpyAsync of every size in `sizes` from `src` to `dst` on `stream`.
void sweep_copy(const std::string& kind, int src_dev, int dst_dev, void* dst, const void* src,
                cudaMemcpyKind direction, const std::vector<std::int64_t>& sizes, const Stream& stream,
                const TimingConfig& timing, Results& results) {
  const std::vector<Lane> lanes = {{stream.device(), stream.get()}};
  for (std::int64_t bytes : sizes) {
    const auto n = static_cast<std::size_t>(bytes);
    const double us = time_median_us(lanes, [&] {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, n, direction, stream.get()));
    }, timing);
    results.memcpy.push_back({kind, src_dev, dst_dev, bytes, us});
  }
}

/// Times cudaMemcpyPeerAsync from device `src` to device `dst` (stream on the source device:
/// its copy engine pushes over the link) after enabling peer access.
void sweep_peer(int src, int dst, const DeviceBuffer& src_buf, const DeviceBuffer& dst_buf,
                const std::vector<std::int64_t>& sizes, const TimingConfig& timing, Results& results) {
  CUDA_CHECK(cudaSetDevice(src));
  const cudaError_t err = cudaDeviceEnablePeerAccess(dst, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    // Already enabled (e.g. by an earlier run in this process) is fine: cudaGetLastError
    // returns and clears that same status; anything else it returns is a real failure.
    const cudaError_t last = cudaGetLastError();
    if (last != cudaErrorPeerAccessAlreadyEnabled) CUDA_CHECK(last);
  } else {
    CUDA_CHECK(err);
  }
  const Stream stream(src);
  const std::vector<Lane> lanes = {{src, stream.get()}};
  for (std::int64_t bytes : sizes) {
    const auto n = static_cast<std::size_t>(bytes);
    const double us = time_median_us(lanes, [&] {
      CUDA_CHECK(cudaMemcpyPeerAsync(dst_buf.get(), dst, src_buf.get(), src, n, stream.get()));
    }, timing);
    results.memcpy.push_back({"p2p", src, dst, bytes, us});
  }
}

/// The sizes whose buffers fit: `copies` buffers of the largest size on every device used.
std::vector<std::int64_t> fitting_sizes(const std::vector<std::int64_t>& sizes, int devices, int copies,
                                        Results& results) {
  std::size_t budget = usable_memory(0);
  for (int d = 1; d < devices; ++d) budget = std::min(budget, usable_memory(d));
  std::vector<std::int64_t> fit;
  for (std::int64_t s : sizes) {
    if (static_cast<std::size_t>(s) * static_cast<std::size_t>(copies) <= budget) {
      fit.push_back(s);
    } else {
      results.skipped.push_back("memcpy " + human_bytes(static_cast<double>(s)) + ": " + std::to_string(copies) +
                                " buffers do not fit in " + human_bytes(static_cast<double>(budget)) +
                                " of free device memory");
    }
  }
  return fit;
}

}  // namespace

void run_memcpy(const Options& o, Results& results) {
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (o.gpus > 0) devices = std::min(devices, o.gpus);
  const TimingConfig timing{o.warmup, o.repeats};
  const std::vector<std::int64_t> sizes = fitting_sizes(o.sizes, devices, 2, results);
  if (sizes.empty()) return;
  const auto max_bytes = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));

  // Host<->device and device-local copies on device 0 (every GPU of a node shares the PCIe
  // generation; per-GPU differences show up in p2p).
  {
    const Stream stream(0);
    const DeviceBuffer a(0, max_bytes);
    const DeviceBuffer b(0, max_bytes);
    progress("memcpy h2d/d2h/d2d on device 0 (" + std::to_string(sizes.size()) + " sizes)");
    {
      const HostBuffer pinned(max_bytes, true);
      sweep_copy("h2d_pinned", 0, 0, a.get(), pinned.get(), cudaMemcpyHostToDevice, sizes, stream, timing, results);
      sweep_copy("d2h_pinned", 0, 0, pinned.get(), a.get(), cudaMemcpyDeviceToHost, sizes, stream, timing, results);
    }
    {
      // Pageable copies go through the driver's pinned staging buffer: slower, and what a
      // framework that never pinned its offloaded experts actually gets.
      const HostBuffer pageable(max_bytes, false);
      sweep_copy("h2d_pageable", 0, 0, a.get(), pageable.get(), cudaMemcpyHostToDevice, sizes, stream, timing,
                 results);
      sweep_copy("d2h_pageable", 0, 0, pageable.get(), a.get(), cudaMemcpyDeviceToHost, sizes, stream, timing,
                 results);
    }
    sweep_copy("d2d", 0, 0, b.get(), a.get(), cudaMemcpyDeviceToDevice, sizes, stream, timing, results);
  }

  if (devices < 2) {
    results.skipped.push_back("memcpy p2p: only one GPU visible");
    return;
  }
  std::vector<DeviceBuffer> buffers;
  for (int d = 0; d < devices; ++d) buffers.emplace_back(d, max_bytes);
  for (int src = 0; src < devices; ++src) {
    for (int dst = 0; dst < devices; ++dst) {
      if (src == dst) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, src, dst));
      if (can == 0) {
        results.skipped.push_back("memcpy p2p " + std::to_string(src) + "->" + std::to_string(dst) +
                                  ": no peer access (cudaDeviceCanAccessPeer = 0)");
        continue;
      }
      progress("memcpy p2p " + std::to_string(src) + "->" + std::to_string(dst));
      sweep_peer(src, dst, buffers[static_cast<std::size_t>(src)], buffers[static_cast<std::size_t>(dst)], sizes,
                 timing, results);
    }
  }
}

}  // namespace moesim::calib
