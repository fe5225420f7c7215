// `moesim cost`: what the simulator believes one operation costs, in microseconds.
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli.hpp"
#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"

namespace moesim {

int cli_cost_gemm(const std::string& gpu_name, long long m, long long n, long long k, const std::string& dtype_str,
                  const std::string& calibration, bool json) {
  GpuSpec gpu;
  std::shared_ptr<const HardwareCalibration> profile;
  if (!calibration.empty()) profile = std::make_shared<const HardwareCalibration>(load_calibration(calibration));
  if (const auto* g = gpu_presets().find(gpu_name)) {
    gpu = g->value;
  } else if (const auto* c = cluster_presets().find(gpu_name)) {
    gpu = c->value.gpu;
  } else {
    std::vector<std::string> names = gpu_presets().names();
    for (const auto& c : cluster_presets().names()) names.push_back(c);
    throw InputError(SourceLocation{"--gpu", 0, 0}, unknown_name_message("GPU", gpu_name, names));
  }
  DType dt;
  parse_dtype(dtype_str, dt);
  if (gpu.peak(dt) <= 0.0)
    throw InputError(SourceLocation{"--dtype", 0, 0}, gpu.name + " has no " + dtype_name(dt) +
                                                          " tensor cores (its " + dtype_name(dt) +
                                                          " peak is 0): choose a dtype it supports");
  const ComputeCostModel model(gpu, ComputeEfficiency{}, profile);
  const Op op = make_gemm("gemm", m, n, k, dt);
  const double kernel_us = model.kernel_seconds(op) * 1e6;
  const double total_us = ticks_to_us(model.op_time(op));
  const double tflops = op.flops / (kernel_us * 1e-6) / 1e12;
  if (json) {
    std::cout << nlohmann::json{{"op", "gemm"}, {"gpu", gpu.name}, {"dtype", dtype_name(dt)}, {"m", m}, {"n", n}, {"k", k},
                                {"calibrated", profile != nullptr},
                                {"kernel_us", kernel_us}, {"time_us", total_us}, {"launch_us", gpu.kernel_launch_us},
                                {"tflops", tflops}, {"efficiency", model.gemm_efficiency(m, n, k)}}
                     .dump()
              << "\n";
  } else {
    std::cout << "gemm m=" << m << " n=" << n << " k=" << k << " " << dtype_name(dt) << " on " << gpu.name << ": "
              << kernel_us << " us kernel (" << tflops << " TFLOP/s), " << total_us << " us with launch\n";
  }
  return 0;
}

int cli_cost_collective(const std::string& kind_name, const std::string& hardware, int gpus, double bytes,
                        const std::string& calibration, const std::string& network_model, bool json) {
  const char* kind_c = kind_name.c_str();
  cluster_presets().get(hardware, SourceLocation{"--hardware", 0, 0});
  ClusterSpec spec = calibrated_preset(hardware, calibration);
  spec.network_model = network_model;
  const Cluster cluster(std::move(spec));
  if (gpus > cluster.num_gpus())
    throw InputError(SourceLocation{"--gpus", 0, 0}, hardware + " has only " +
                                                         std::to_string(cluster.num_gpus()) + " GPUs");
  CollectiveKind kind;
  parse_collective(kind_c, kind);
  if (kind == CollectiveKind::kSendRecv && gpus < 2)
    throw InputError(SourceLocation{"--gpus", 0, 0}, "sendrecv needs --gpus >= 2");
  const double us = ticks_to_us(collective_time(cluster, kind, gpus, bytes));
  // nccl-tests conventions: algbw = bytes / time; busbw scales by the collective's factor.
  const double algbw = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0;
  double factor = 1.0;
  if (kind == CollectiveKind::kAllReduce) factor = 2.0 * (gpus - 1) / gpus;
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kAllToAll) factor = static_cast<double>(gpus - 1) / gpus;
  if (json) {
    std::cout << nlohmann::json{{"op", kind_c}, {"hardware", hardware}, {"gpus", gpus}, {"bytes", bytes},
                                {"calibrated", !calibration.empty()},
                                {"network_model", network_model}, {"time_us", us}, {"algbw_GBps", algbw}, {"busbw_GBps", algbw * factor}}
                     .dump()
              << "\n";
  } else {
    std::cout << kind_c << " of " << bytes << " bytes over " << gpus << " GPUs of " << hardware << ": " << us
              << " us (algbw " << algbw << " GB/s, busbw " << algbw * factor << " GB/s)\n";
  }
  return 0;
}

}  // namespace moesim
