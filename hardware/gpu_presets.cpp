// GPU presets from vendor datasheets and architecture whitepapers.
//
// Conventions shared by every preset below:
//  - Peak rates are DENSE (the datasheets' "with sparsity" figures are halved away).
//  - fp32 is the plain FP32 CUDA-core peak, not TF32: TF32 tensor math is opt-in in frameworks
//    (PyTorch has defaulted `allow_tf32` to False for matmuls since 1.12), so an fp32 GEMM runs at
//    the CUDA-core rate unless the user asks otherwise.
//  - fp16/bf16/fp8 are tensor-core peaks WITH FP32 ACCUMULATION: cuBLAS' default compute type for
//    half-precision GEMMs in PyTorch, vLLM and SGLang is CUBLAS_COMPUTE_32F, and FP8 GEMMs in
//    cuBLASLt always accumulate in fp32. On datacenter parts this is the full tensor rate; on
//    GeForce parts (RTX 3090, RTX 4090) fp32 accumulation runs at half the fp16-accumulate rate.
//  - 0 means "no hardware support" (V100 has no bf16; only Hopper and Ada have fp8).
//  - memory_bytes is the datasheet's marketing capacity in decimal GB (1e9 bytes), the project's
//    unit for memory_GB in scenarios. Physical HBM/GDDR capacity is binary (an "80GB" A100 holds
//    80 GiB = 85.9e9 bytes) but the CUDA context, ECC-reserved pages and the framework allocator's
//    reserve take a few GB of that, so the decimal figure is a fair usable capacity.
//  - copy_engines = 2 everywhere: one per direction is what overlapping H2D with D2H needs;
//    deviceQuery reports more engines on datacenter parts, but same-direction copies share one
//    PCIe link anyway, which the flow network already models.
//  - kernel_launch_us = 4: the CPU-side cost of one launch through PyTorch/CUDA runtime
//    (~3-5 us); CUDA graphs would lower it and a scenario can override it.
#include <stdexcept>
#include <string>

#include "hardware/gpu_spec.hpp"

namespace moesim {

namespace {

constexpr double kT = 1e12;  // TFLOP/s
constexpr double kG = 1e9;   // GB and GB/s (decimal)

struct Peaks {
  double fp32, fp16, bf16, fp8;  // TFLOP/s, dense
};

GpuSpec make_gpu(std::string name, Peaks p, double hbm_GBps, double memory_GB, int pcie_gen,
                 int sm_count, int compute_capability) {
  GpuSpec g;
  g.name = std::move(name);
  g.peak_flops[static_cast<int>(DType::kFp32)] = p.fp32 * kT;
  g.peak_flops[static_cast<int>(DType::kFp16)] = p.fp16 * kT;
  g.peak_flops[static_cast<int>(DType::kBf16)] = p.bf16 * kT;
  g.peak_flops[static_cast<int>(DType::kFp8)] = p.fp8 * kT;
  g.hbm_bandwidth_Bps = hbm_GBps * kG;
  g.memory_bytes = memory_GB * kG;
  g.pcie_gen = pcie_gen;
  g.sm_count = sm_count;
  g.compute_capability = compute_capability;
  g.copy_engines = 2;
  g.kernel_launch_us = 4.0;
  return g;
}

void add(Registry<GpuSpec>& r, const char* description, GpuSpec g) {
  std::string name = g.name;
  r.add(std::move(name), description, std::move(g));
}

void register_presets(Registry<GpuSpec>& r) {
  // NVIDIA Tesla V100 datasheet (SXM2): 15.7 TFLOPS FP32, 125 TFLOPS tensor (fp16 in, fp32
  // accumulate at full rate on Volta), 900 GB/s HBM2, 32 GB; Volta whitepaper: 80 SMs, PCIe 3.0.
  add(r, "NVIDIA V100 SXM2 32GB (Volta): 125 TF fp16 tensor, no bf16, 900 GB/s HBM2",
      make_gpu("V100-SXM2-32GB", {15.7, 125.0, 0.0, 0.0}, 900.0, 32.0, 3, 80, 70));

  // NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF, FP16/BF16 tensor 312 TF dense (624
  // sparse), 40GB HBM2 at 1,555 GB/s (SXM4 40GB), 80GB HBM2e at 2,039 GB/s (SXM4 80GB);
  // Ampere GA100 whitepaper: 108 SMs, PCIe 4.0.
  add(r, "NVIDIA A100 SXM4 40GB (Ampere): 312 TF fp16/bf16, 1555 GB/s HBM2",
      make_gpu("A100-SXM4-40GB", {19.5, 312.0, 312.0, 0.0}, 1555.0, 40.0, 4, 108, 80));
  add(r, "NVIDIA A100 SXM4 80GB (Ampere): 312 TF fp16/bf16, 2039 GB/s HBM2e",
      make_gpu("A100-SXM4-80GB", {19.5, 312.0, 312.0, 0.0}, 2039.0, 80.0, 4, 108, 80));

  // NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP32 67 TF; FP16/BF16 1,979 TF and FP8
  // 3,958 TF with sparsity, i.e. 989.4 and 1,978.9 dense (Hopper whitepaper, table 3);
  // 80GB HBM3 at 3.35 TB/s; 132 SMs; PCIe 5.0.
  add(r, "NVIDIA H100 SXM5 80GB (Hopper): 989 TF fp16/bf16, 1979 TF fp8, 3.35 TB/s HBM3",
      make_gpu("H100-SXM-80GB", {67.0, 989.4, 989.4, 1978.9}, 3350.0, 80.0, 5, 132, 90));

  // NVIDIA H200 Tensor Core GPU datasheet (SXM): same GH100 compute as H100 SXM, 141GB HBM3e at
  // 4.8 TB/s; PCIe 5.0.
  add(r, "NVIDIA H200 SXM 141GB (Hopper): H100 compute with 141 GB HBM3e at 4.8 TB/s",
      make_gpu("H200-141GB", {67.0, 989.4, 989.4, 1978.9}, 4800.0, 141.0, 5, 132, 90));

  // NVIDIA Ampere GA102 whitepaper, appendix A (GeForce RTX 3090): FP32 35.6 TF; FP16 tensor
  // 142 TF with FP16 accumulate but 71 TF with FP32 accumulate (GeForce runs fp32-accumulate
  // at half rate); BF16 71 TF (fp32 accumulate only); no fp8. 24GB GDDR6X at 936 GB/s, 82 SMs,
  // PCIe 4.0. We use 71: frameworks accumulate half-precision GEMMs in fp32 (see top).
  add(r, "NVIDIA GeForce RTX 3090 (Ampere GA102): 71 TF fp16/bf16 (fp32 acc.), 936 GB/s GDDR6X",
      make_gpu("RTX-3090", {35.6, 71.0, 71.0, 0.0}, 936.0, 24.0, 4, 82, 86));

  // NVIDIA Ada Lovelace architecture whitepaper, appendix A (GeForce RTX 4090): FP32 82.6 TF;
  // FP16/BF16 tensor with FP32 accumulate 165.2 TF dense (330.3 with FP16 accumulate); FP8 with
  // FP32 accumulate 330.3 TF dense (660.6 with FP16 accumulate). 24GB GDDR6X at 1,008 GB/s,
  // 128 SMs, PCIe 4.0.
  add(r, "NVIDIA GeForce RTX 4090 (Ada AD102): 165 TF fp16/bf16, 330 TF fp8 (fp32 acc.), 1008 GB/s",
      make_gpu("RTX-4090", {82.6, 165.2, 165.2, 330.3}, 1008.0, 24.0, 4, 128, 89));
}

}  // namespace

Registry<GpuSpec>& gpu_presets() {
  // The built-in presets are added when the registry is first used rather than by a
  // namespace-scope static: cluster presets (and any other file's static initialiser) may look a
  // GPU up before this file's statics have run, as cross-file initialisation order is unspecified.
  static Registry<GpuSpec> registry = [] {
    Registry<GpuSpec> r("GPU preset");
    register_presets(r);
    return r;
  }();
  return registry;
}

double pcie_x16_bandwidth_Bps(int gen) {
  // Per direction, x16, after line encoding: gen3 8 GT/s with 128b/130b = 15.75 GB/s; each later
  // generation doubles the rate (gen6 moves to PAM4/FLIT, nominally 2x gen5 again).
  switch (gen) {
    case 3: return 15.75e9;
    case 4: return 31.5e9;
    case 5: return 63.0e9;
    case 6: return 126.0e9;
    default:
      throw std::invalid_argument("unsupported PCIe generation " + std::to_string(gen) +
                                  " (known: 3, 4, 5, 6)");
  }
}

}  // namespace moesim
