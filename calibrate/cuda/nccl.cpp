// NCCL benchmark: the collectives MoE inference uses (all-reduce after tensor-parallel layers,
// all-gather, all-to-all token dispatch/combine, point-to-point expert transfers) over a size
// sweep, on all visible GPUs driven from this one process (ncclCommInitAll), reported with
// nccl-tests' size convention and algbw/busbw formulas so that its numbers can be compared.
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "benchmarks.hpp"
#include "timer.hpp"

namespace moesim::calib {

namespace {

/// One communicator per device plus a stream and send/receive buffers on each.
class Ranks {
 public:
  Ranks(int n, std::size_t buffer_bytes) : comms_(static_cast<std::size_t>(n)) {
    std::vector<int> devs(static_cast<std::size_t>(n));
    for (int d = 0; d < n; ++d) devs[static_cast<std::size_t>(d)] = d;
    NCCL_CHECK(ncclCommInitAll(comms_.data(), n, devs.data()));
    for (int d = 0; d < n; ++d) {
      streams_.push_back(std::make_unique<Stream>(d));
      send_.emplace_back(d, buffer_bytes);
      recv_.emplace_back(d, buffer_bytes);
      // Defined contents: NaNs would not slow NCCL, but a sanitizer or a reader of the buffers would object.
      CUDA_CHECK(cudaMemset(send_.back().get(), 0, buffer_bytes));
      CUDA_CHECK(cudaMemset(recv_.back().get(), 0, buffer_bytes));
    }
    for (int d = 0; d < n; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  ~Ranks() {
    for (ncclComm_t c : comms_) NCCL_CHECK(ncclCommDestroy(c));
  }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int r) const { return comms_[static_cast<std::size_t>(r)]; }
  cudaStream_t stream(int r) const { return streams_[static_cast<std::size_t>(r)]->get(); }
  std::byte* send(int r) const { return send_[static_cast<std::size_t>(r)].bytes(); }
  std::byte* recv(int r) const { return recv_[static_cast<std::size_t>(r)].bytes(); }

  /// Timing lanes for ranks [0, count).
  std::vector<Lane> lanes(int count) const {
    std::vector<Lane> out;
    for (int r = 0; r < count; ++r) out.push_back({r, stream(r)});
    return out;
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<DeviceBuffer> send_, recv_;
};

/// Runs `per_rank(r)` for every rank inside one group: one thread driving several devices must
/// group its calls or the first one blocks waiting for ranks that were never launched.
void grouped(int ranks, const std::function<void(int)>& per_rank) {
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < ranks; ++r) per_rank(r);
  NCCL_CHECK(ncclGroupEnd());
}

/// nccl-tests' bus-bandwidth factor: what each link carries relative to the algorithm bandwidth.
double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "all_to_all") return static_cast<double>(n - 1) / n;
  return 1.0;  // send_recv
}

/// Appends one sample with algbw = bytes / time and busbw = algbw · bus_factor.
void record(Results& results, const std::string& op, int gpus, std::int64_t bytes, double us) {
  const double algbw = us > 0.0 ? static_cast<double>(bytes) / (us * 1e-6) / 1e9 : 0.0;
  results.collectives.push_back({op, gpus, 1, bytes, us, algbw, algbw * bus_factor(op, gpus)});
}

}  // namespace

void run_nccl(const Options& o, Results& results) {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (o.gpus > 0) n = std::min(n, o.gpus);
  if (n < 2) {
    results.skipped.push_back("nccl all_reduce, all_gather, all_to_all, send_recv: need at least 2 GPUs, " +
                              std::to_string(n) + " visible");
    return;
  }
  constexpr std::size_t kElem = sizeof(float);  // ncclFloat, nccl-tests' default type
  std::size_t budget = usable_memory(0);
  for (int d = 1; d < n; ++d) budget = std::min(budget, usable_memory(d));
  std::vector<std::int64_t> sizes;
  for (std::int64_t s : o.sizes) {
    // Send and receive buffer per rank, plus room for NCCL's own buffers (budget margin).
    if (2 * static_cast<std::size_t>(s) <= budget) {
      sizes.push_back(s);
    } else {
      results.skipped.push_back("nccl " + human_bytes(static_cast<double>(s)) + ": buffers do not fit in " +
                                human_bytes(static_cast<double>(budget)) + " of free device memory");
    }
  }
  if (sizes.empty()) return;
  const auto max_bytes = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
  progress("nccl: initialising " + std::to_string(n) + " ranks");
  const Ranks ranks(n, max_bytes);
  const TimingConfig timing{o.warmup, o.repeats};
  const std::vector<Lane> all_lanes = ranks.lanes(n);

  progress("nccl all_reduce, all_gather, all_to_all, send_recv on " + std::to_string(n) + " GPUs (" +
           std::to_string(sizes.size()) + " sizes)");
  for (std::int64_t size : sizes) {
    // all_reduce: `size` bytes in and out on every rank.
    const std::size_t count = static_cast<std::size_t>(size) / kElem;
    if (count > 0) {
      const double us = time_median_us(all_lanes, [&] {
        grouped(n, [&](int r) {
          NCCL_CHECK(ncclAllReduce(ranks.send(r), ranks.recv(r), count, ncclFloat, ncclSum, ranks.comm(r),
                                   ranks.stream(r)));
        });
      }, timing);
      record(results, "all_reduce", n, static_cast<std::int64_t>(count * kElem), us);
    }

    // all_gather and all_to_all: `size` is the whole per-rank buffer (nccl-tests' convention),
    // so each rank contributes, or sends each peer, size / n bytes.
    const std::size_t part = static_cast<std::size_t>(size) / kElem / static_cast<std::size_t>(n);
    const auto total = static_cast<std::int64_t>(part * kElem * static_cast<std::size_t>(n));
    if (part > 0) {
      const double gather_us = time_median_us(all_lanes, [&] {
        grouped(n, [&](int r) {
          NCCL_CHECK(ncclAllGather(ranks.send(r), ranks.recv(r), part, ncclFloat, ranks.comm(r), ranks.stream(r)));
        });
      }, timing);
      record(results, "all_gather", n, total, gather_us);

      const double a2a_us = time_median_us(all_lanes, [&] {
        grouped(n, [&](int r) {
          for (int peer = 0; peer < n; ++peer) {
            const std::size_t off = static_cast<std::size_t>(peer) * part * kElem;
            NCCL_CHECK(ncclSend(ranks.send(r) + off, part, ncclFloat, peer, ranks.comm(r), ranks.stream(r)));
            NCCL_CHECK(ncclRecv(ranks.recv(r) + off, part, ncclFloat, peer, ranks.comm(r), ranks.stream(r)));
          }
        });
      }, timing);
      record(results, "all_to_all", n, total, a2a_us);
    }

    // send_recv: rank 0 sends `size` bytes to rank 1, the one link a point-to-point transfer uses.
    if (count > 0) {
      const double us = time_median_us(ranks.lanes(2), [&] {
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclSend(ranks.send(0), count, ncclFloat, 1, ranks.comm(0), ranks.stream(0)));
        NCCL_CHECK(ncclRecv(ranks.recv(1), count, ncclFloat, 0, ranks.comm(1), ranks.stream(1)));
        NCCL_CHECK(ncclGroupEnd());
      }, timing);
      record(results, "send_recv", 2, static_cast<std::int64_t>(count * kElem), us);
    }
  }
}

}  // namespace moesim::calib
