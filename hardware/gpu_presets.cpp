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
//  - 0 means "no hardware support" (V100 has no bf16; only Hopper, Ada and Blackwell have fp8;
//    only Blackwell has fp4, one peak for NVFP4 and MXFP4).
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
  double fp4 = 0.0;
};

GpuSpec make_gpu(std::string name, Peaks p, double hbm_GBps, double memory_GB, int pcie_gen,
                 int sm_count, int compute_capability) {
  GpuSpec g;
  g.name = std::move(name);
  g.peak_flops[static_cast<int>(DType::kFp32)] = p.fp32 * kT;
  g.peak_flops[static_cast<int>(DType::kFp16)] = p.fp16 * kT;
  g.peak_flops[static_cast<int>(DType::kBf16)] = p.bf16 * kT;
  g.peak_flops[static_cast<int>(DType::kFp8)] = p.fp8 * kT;
  g.peak_flops[static_cast<int>(DType::kNvFp4)] = p.fp4 * kT;
  g.peak_flops[static_cast<int>(DType::kMxFp4)] = p.fp4 * kT;
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

  // H800 SXM5: the GH100 of H100 SXM (same tensor peaks, 80GB HBM3 at 3.35 TB/s, 132 SMs) with its
  // NVLink cut to 400 GB/s bidirectional (the cluster presets carry the links). DeepSeek-V3 was
  // trained and served on it (DeepSeek-V3 report §3.1).
  add(r, "NVIDIA H800 SXM5 80GB (Hopper): H100 SXM compute, NVLink cut to 400 GB/s bidirectional",
      make_gpu("H800-SXM-80GB", {67.0, 989.4, 989.4, 1978.9}, 3350.0, 80.0, 5, 132, 90));

  // NVIDIA H20 (HGX H20 product brief): FP32 44 TF, FP16/BF16 tensor 148 TF and FP8 296 TF dense,
  // 96GB HBM3 at 4.0 TB/s, NVLink 900 GB/s, PCIe 5.0; a GH100 with 78 SMs enabled.
  add(r, "NVIDIA H20 96GB (Hopper): 148 TF fp16/bf16, 296 TF fp8, 4.0 TB/s HBM3",
      make_gpu("H20-96GB", {44.0, 148.0, 148.0, 296.0}, 4000.0, 96.0, 5, 78, 90));

  // NVIDIA DGX B200 / HGX B200 datasheets (per GPU, dense = half the sparse figures): FP16/BF16
  // 2.25 PF, FP8 4.5 PF, FP4 9 PF; FP32 75 TF; 180GB HBM3e (DGX B200: 1,440 GB over 8 GPUs) at
  // 8 TB/s (HGX B200 datasheet 7.7 TB/s per GPU; we take the DGX figure 64 TB/s / 8); NVLink 5 at
  // 1.8 TB/s bidirectional; Blackwell architecture technical brief: 148 SMs, compute capability 10.0.
  add(r, "NVIDIA B200 180GB (Blackwell): 2.25 PF fp16/bf16, 4.5 PF fp8, 9 PF fp4, 8 TB/s HBM3e",
      make_gpu("B200-180GB", {75.0, 2250.0, 2250.0, 4500.0, 9000.0}, 8000.0, 180.0, 5, 148, 100));

  // GB200 NVL72 datasheet (per GPU = rack / 72; dense = half the sparse figures): FP4 720 PF sparse
  // -> 10 PF dense, FP8 360 PF -> 5 PF, FP16/BF16 180 PF -> 2.5 PF, FP32 5,760 TF -> 80 TF; 13.4 TB
  // HBM3e -> 186 GB at 8 TB/s (576 TB/s / 72); the GB200 runs at 1.2 kW against HGX B200's 1 kW,
  // about 11% more at every precision. Host link: NVLink-C2C to its Grace (the cluster preset).
  add(r, "NVIDIA B200 in GB200 NVL72 (Blackwell, 1.2 kW): 2.5 PF fp16/bf16, 5 PF fp8, 10 PF fp4, 186 GB",
      make_gpu("GB200-186GB", {80.0, 2500.0, 2500.0, 5000.0, 10000.0}, 8000.0, 186.0, 6, 152, 100));

  // HGX B300 datasheet (Blackwell Ultra, per GPU, dense): FP4 13.5 PF (108 PF dense per 8 GPUs),
  // FP8 4.5 PF and FP16/BF16 2.25 PF (no gain over B200 at HGX power), FP32 75 TF; 288GB HBM3e
  // (2.3 TB per 8 GPUs) at 8 TB/s; PCIe 6.0; compute capability 10.3. GB300 NVL72 datasheet (per
  // GPU = rack / 72): FP4 1,080 PF dense -> 15 PF, FP8 5 PF, FP16/BF16 2.5 PF; 20.7 TB HBM3e ->
  // 288 GB at 8 TB/s. SM counts (148 on HGX parts, 152 in the NVL72 superchips) are third-party
  // deviceQuery reports: NVIDIA's datasheets do not state them.
  add(r, "NVIDIA B300 288GB (Blackwell Ultra): 2.25 PF fp16/bf16, 4.5 PF fp8, 13.5 PF fp4, 8 TB/s HBM3e",
      make_gpu("B300-288GB", {75.0, 2250.0, 2250.0, 4500.0, 13500.0}, 8000.0, 288.0, 6, 148, 103));
  add(r, "NVIDIA B300 in GB300 NVL72 (Blackwell Ultra, 1.4 kW): 2.5 PF fp16/bf16, 5 PF fp8, 15 PF fp4, 288 GB",
      make_gpu("GB300-288GB", {80.0, 2500.0, 2500.0, 5000.0, 15000.0}, 8000.0, 288.0, 6, 152, 103));

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
